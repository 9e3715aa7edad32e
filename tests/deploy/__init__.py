"""planner export: engine launch settings and Kubernetes manifests from a recommendation."""
