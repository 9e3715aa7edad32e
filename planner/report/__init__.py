"""Finance reports from a stored recommendation: cost projection, commitment schedule,
sensitivity, assumptions and plan vs actual, as Excel, PDF and FOCUS CSV (``planner report``).

``build.build`` computes every figure once, on values that ``planner.usecases.report`` reads
from the store first (``model`` holds the report's shape, ``projection`` and ``sensitivity``
its arithmetic); ``excel``, ``pdf`` and ``focus`` only lay it out; ``actuals`` reads what was
really spent (AWS Cost Explorer, Azure Cost Management, a GCP billing export) and sets it
against the plan.
"""
