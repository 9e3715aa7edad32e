"""Workloads as values: a dataset's statistics (:mod:`planner.workload.summary`), hourly rate
curves (:mod:`planner.workload.rates`) and the ``ds,y`` CSV reader they share
(:mod:`planner.workload.hourly_csv`). The package imports nothing itself, so a rate curve is
read without loading pandas."""
