"""Live price loaders: each cloud's own pricing API, normalized into :class:`PricePoint` rows.

One module per provider, each with the same entry point::

    fetch(region: str | None = None, *, client=None, now: datetime | None = None, ...)
        -> list[PricePoint]

``pricing.loaders.aws`` (boto3: Price List, Savings Plans and spot price history),
``pricing.loaders.gcp`` (google-cloud-billing: the Cloud Billing Catalog) and
``pricing.loaders.azure`` (the public Retail Prices REST API, standard library only). Each covers
the GPU instance types planner knows, raises :class:`LoaderError` when a refresh cannot be
trusted, and takes its credentials from the SDK's standard chain (never stored, never logged).

The provider modules are imported lazily by :func:`fetch`, so a missing SDK only affects its own
provider. See docs/price-loaders.md for what each loader calls and filters.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from planner.common.secrets import redact_text
from planner.errors import PlannerError

if TYPE_CHECKING:
    from pricing.model import PricePoint, Provider

__all__ = ["LOADER_MODULES", "LoaderError", "fetch"]

#: provider name -> module implementing ``fetch``
LOADER_MODULES = {
    "aws": "pricing.loaders.aws",
    "gcp": "pricing.loaders.gcp",
    "azure": "pricing.loaders.azure",
}

#: the package each loader needs, for the message when it is not installed
_SDK_PACKAGES = {"aws": "boto3", "gcp": "google-cloud-billing", "azure": ""}


class LoaderError(PlannerError):
    """A live price refresh failed. Names the provider and why; never carries credentials."""

    def __init__(self, provider: Provider | str, reason: str) -> None:
        self.provider = str(provider)  # Provider is a StrEnum: its str is the value
        self.reason = redact_text(reason)  # an SDK's words may name an endpoint with a password
        super().__init__(f"{self.provider} price refresh failed: {self.reason}")


def fetch(provider: Provider | str, region: str | None = None, **options: Any) -> list[PricePoint]:
    """Run one provider's loader (``aws``, ``gcp`` or ``azure``) with its own options."""
    name = str(provider).lower()
    module_name = LOADER_MODULES.get(name)
    if module_name is None:
        known = ", ".join(LOADER_MODULES)
        raise LoaderError(name, f"no live loader for this provider (known: {known})")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:  # the provider's SDK is not installed
        package = _SDK_PACKAGES.get(name) or exc.name or "its SDK"
        raise LoaderError(name, f"{package} is not installed ({exc})") from exc
    points: list[PricePoint] = module.fetch(region, **options)
    return points
