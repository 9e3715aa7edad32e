"""Readable names of the cloud regions planner prices: a small bundled table, region id to name,
for the FOCUS export's ``RegionName`` (and anywhere a region is shown to people).

It covers the regions of the bundled price snapshot (``data/prices/gpu_prices_snapshot.csv``:
aws us-east-1, gcp us-central1 and us-east4, azure eastus and eastus2) and a few more GPU
regions the docs and samples name. Names as each provider publishes them, compiled 2026-12-07
from these public lists (written down here, not fetched: check a new region against them):

* AWS: the "Name" column of "Regions, Availability Zones, and Local Zones" (Amazon EC2 User
  Guide, https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/using-regions-availability-zones.html);
* Google Cloud: the "Location" column of "Regions and zones"
  (https://cloud.google.com/compute/docs/regions-zones);
* Azure: the display name of ``az account list-locations`` (the ``name`` column is the id),
  as listed in "Azure geographies" (https://azure.microsoft.com/explore/global-infrastructure/geographies/).

A region missing here has no name (:func:`region_name` returns None); callers that must show
one fall back to the id.
"""

from __future__ import annotations

#: (provider, region id, name), one row per region
REGION_NAMES: tuple[tuple[str, str, str], ...] = (
    ("aws", "us-east-1", "US East (N. Virginia)"),
    ("aws", "us-east-2", "US East (Ohio)"),
    ("aws", "us-west-2", "US West (Oregon)"),
    ("aws", "eu-central-1", "Europe (Frankfurt)"),
    ("aws", "ap-south-1", "Asia Pacific (Mumbai)"),
    ("gcp", "us-central1", "Council Bluffs, Iowa, North America"),
    ("gcp", "us-east1", "Moncks Corner, South Carolina, North America"),
    ("gcp", "us-east4", "Ashburn, Virginia, North America"),
    ("gcp", "us-west1", "The Dalles, Oregon, North America"),
    ("gcp", "europe-west4", "Eemshaven, Netherlands, Europe"),
    ("gcp", "asia-southeast1", "Jurong West, Singapore, APAC"),
    ("azure", "eastus", "East US"),
    ("azure", "eastus2", "East US 2"),
    ("azure", "westus2", "West US 2"),
    ("azure", "westeurope", "West Europe"),
)
#: the same table, keyed by (provider, region id)
_BY_ID = {(provider, region): name for provider, region, name in REGION_NAMES}


def region_name(provider: str, region: str) -> str | None:
    """The readable name of ``region`` of ``provider`` (``aws``, ``gcp``, ``azure``), e.g.
    ``("aws", "us-east-1")`` -> "US East (N. Virginia)"; None when the table has no such region.
    Ids compare as the providers write them (lower case), ignoring surrounding spaces and case."""
    return _BY_ID.get((provider.strip().lower(), region.strip().lower()))
