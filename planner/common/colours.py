"""One colour per provider and per purchase option, shared by every chart (the dashboard's and
the reports'), so a provider or a purchase option looks the same everywhere."""

from __future__ import annotations

from typing import Final

PROVIDER_COLOURS: Final[dict[str, str]] = {
    "aws": "#FF9900",
    "gcp": "#34A853",
    "azure": "#0078D4",
    "other": "#7F7F7F",
}
PURCHASE_COLOURS: Final[dict[str, str]] = {
    "on-demand": "#636EFA",
    "spot": "#EF553B",
    "reserved-1y": "#00CC96",
    "reserved-3y": "#007F5F",
    "savings-plan-1y": "#AB63FA",
    "savings-plan-3y": "#6A1B9A",
    "committed-1y": "#19D3F3",
    "committed-3y": "#0E7C9B",
    "reserved": "#00CC96",  # the simulator's purchase groups
}
SLO_COLOUR: Final = "#D62728"
OTHER_COLOUR: Final = "#7F7F7F"  # anything not named above


def provider_colour(provider: str) -> str:
    return PROVIDER_COLOURS.get(provider.lower(), OTHER_COLOUR)


def purchase_colour(purchase_option: str) -> str:
    return PURCHASE_COLOURS.get(purchase_option.lower(), OTHER_COLOUR)
