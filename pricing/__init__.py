"""Cloud GPU price sheets: the bundled snapshot, live loaders and the purchase-option cost model.

The package is reserved by the project layout; its contents arrive with the price-sheet issue.
"""
