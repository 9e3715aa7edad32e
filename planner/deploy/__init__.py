"""From a stored recommendation to a running fleet: each pool's engine launch settings
(:mod:`engines`) and Kubernetes manifests (:mod:`kubernetes`), from :mod:`plan`'s pools."""
