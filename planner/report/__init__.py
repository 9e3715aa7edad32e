"""Finance reports from a stored recommendation: cost projection, commitment schedule,
sensitivity, assumptions and plan vs actual, as Excel, PDF and FOCUS CSV (``planner report``).

``model.build_report`` computes every figure once; ``excel``, ``pdf`` and ``focus`` only lay it
out; ``actuals`` reads what was really spent (AWS Cost Explorer, Azure Cost Management, a GCP
billing export) and sets it against the plan.
"""
