"""Proprietary models (issue 34, deliverable 5): a model a log names that only per-token APIs
serve (``gpt-4o-mini``, ``claude-3-5-haiku``: the API price sheet prices it, no catalog model
is it) has no self-hosted option, so its plan is the API bill; unless the user names a catalog
model to serve in its place (``--substitute gpt-4o-mini=llama-3.1-8b``): then that model is
searched self-hosted and the API priced by the log's name, and whether the substitute answers
as well is the user's call, which the result says.

Numbers in, numbers out: no store, no CLI (the use case, :mod:`planner.usecases.recommend`,
reads the log and the prices).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from planner.common.text import shown
from planner.errors import UsageError
from planner.recommend.engine import Recommendation
from planner.recommend.inputs import Request
from planner.workload.model_names import catalog_model_of, shown_name
from planner.workload.rates import HOUR_S
from pricing.api import TokenPrice, api_prices_for

ApiModelOf = Callable[[str], str | None]


def api_model_of(prices: Sequence[TokenPrice]) -> ApiModelOf:
    """A log's model name -> the proprietary model it is, as the price sheet's ``model`` column
    names it (``gpt-4o-mini-2024-07-18`` -> ``gpt-4o-mini``); None when no offer prices the
    name, or an offer of it serves a catalog model (an open-weights model hosted by the token).
    Remembers its answers: a log holds few names."""
    known: dict[str, str | None] = {}

    def of(name: str) -> str | None:
        key = name.strip()
        if key not in known:
            offers = api_prices_for(key, prices) if key else []
            proprietary = offers and all(p.catalog_model is None for p in offers)
            known[key] = offers[0].model if proprietary else None
        return known[key]

    return of


@dataclass(frozen=True)
class PlannedModel:
    """What a one-model search plans for the model asked: the catalog ``model`` searched
    self-hosted (None: a proprietary model without a substitute: the API bill only), the name
    the API offers are looked up by when it is not the model's own (``api_model``), and the
    substitution made (``{"log_model", "catalog_model"}``; None: none)."""

    model: str | None
    api_model: str | None = None
    substitute: dict[str, str] | None = None


def planned_model(asked: str, substitutes: Mapping[str, str], api_of: ApiModelOf) -> PlannedModel:
    """The plan for ``--model asked`` under ``--substitute LOGNAME=CATALOG`` items: a LOGNAME
    asked (or a name of the same proprietary model) is served as its CATALOG, priced on the API
    as LOGNAME; a CATALOG asked is priced as the LOGNAME it stands in for; a proprietary model
    without a substitute has no self-hosted search; anything else is searched as asked (an
    unknown model is refused by the search, with the catalog's closest names)."""
    wanted = asked.strip().lower()
    asked_api = api_of(asked)
    for log_model, catalog in substitutes.items():
        same_api = asked_api is not None and (api_of(log_model) or "").lower() == asked_api.lower()
        if log_model.strip().lower() == wanted or same_api:
            return PlannedModel(catalog, log_model, _substitute(log_model, catalog))
    served = catalog_model_of(asked)
    if served is not None:
        for log_model, target in substitutes.items():
            if target == served:
                return PlannedModel(asked, log_model, _substitute(log_model, target))
        return PlannedModel(asked)
    if asked_api is not None:
        return PlannedModel(None, asked)
    return PlannedModel(asked)


def _substitute(log_model: str, catalog: str) -> dict[str, str]:
    return {"log_model": log_model, "catalog_model": catalog}


def quality_note(substitute: Mapping[str, str]) -> str:
    """What a substitution leaves to the user."""
    log_model, catalog = substitute["log_model"], substitute["catalog_model"]
    return (
        f"{catalog} is served in place of {shown_name(log_model)} (--substitute): whether its "
        f"answers are as good as those of {shown_name(log_model)} is your call; the planner "
        "sizes and prices it, it does not judge quality"
    )


def no_self_hosted_note(model: str) -> str:
    """Why a proprietary model's plan is the API bill, and how to plan it self-hosted."""
    return (
        f"{shown_name(model)} is a proprietary model: no self-hosted option without a substitute. "
        f"Name a catalog model to serve in its place with --substitute "
        f"{shown(model + '=CATALOG', 200)} (e.g. {shown(model + '=llama-3.1-8b', 200)}; see "
        "`planner catalog models`); its quality against the API model is then your call"
    )


@dataclass
class PlannedRecommendation(Recommendation):
    """A one-model search's result that also names its substitution (``substitute``), or the
    API bill alone for a proprietary model (``api_only``: why there is no self-hosted fleet)."""

    substitute: dict[str, str] | None = None
    api_only: str | None = None

    @classmethod
    def of(cls, found: Recommendation, substitute: dict[str, str]) -> PlannedRecommendation:
        """``found`` with its substitution named and the quality note first among its notes."""
        values = {f.name: getattr(found, f.name) for f in fields(Recommendation)}
        values["notes"] = [quality_note(substitute), *found.notes]
        return cls(**values, substitute=substitute)

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        if self.substitute is not None:
            data["substitute"] = self.substitute
        if self.api_only is not None:
            data["api_only"] = self.api_only
        return data


def api_only(
    request: Request,
    prices: Sequence[TokenPrice],
    model: str,
) -> PlannedRecommendation:
    """A proprietary model's plan: no self-hosted search, the API bill of the request's demand
    on the cheapest offer serving ``model`` (the others listed). ``--api never`` or no offer
    (of ``--api-provider``) leaves nothing to plan: a UsageError saying what would."""
    from planner.recommend.api import choose

    began = time.perf_counter()
    options = request.options
    why = no_self_hosted_note(model)
    if options.api == "never":
        raise UsageError(f"--api never: {why}, or allow the API (--api allow)")
    offers = api_prices_for(model, list(prices), provider=options.api_provider)
    if not offers:
        serving = sorted({p.provider for p in api_prices_for(model, list(prices))})
        raise UsageError(
            f"--api-provider {shown(options.api_provider or '')}: no offer of it serves "
            f"{shown_name(model)}; providers that do: {', '.join(serving) or 'none'}"
        )
    found = choose(request, offers, [], None, None, "only")
    assert found is not None  # offers given, mode "only"
    return PlannedRecommendation(
        request={
            "targets": request.targets.to_dict(),
            "constraints": request.constraints.to_dict(),
            "options": options.to_dict(),
            "spot_share": 0.0,
        },
        demand=request.demand.summary(),
        winner=None,
        plan=None,
        ranked=[],
        pareto=[],
        rejected=[],
        stats={
            "candidates": 0,
            "screened": 0,
            "passed_screen": 0,
            "verified": 0,
            "verifications": 0,
            "simulations": 0,
            "runner": "none (no self-hosted option)",
            "wall_s": time.perf_counter() - began,
        },
        hourly=_hourly(request),
        notes=[why],
        api=found.to_dict(),
        api_only=why,
    )


def _hourly(request: Request) -> dict[str, list[float]]:
    """Per hour: its start (epoch s) and the requests (no fleet to add)."""
    curve = request.demand.curve
    return {
        "hour_start": [curve.start.timestamp() + h * HOUR_S for h in range(curve.hours)],
        "requests": curve.requests_per_hour.tolist(),
    }
