"""Simulating a fleet serving a workload: the requests to replay or generate, and the fleet."""
