"""A bundled CustomResourceDefinition's schema for one version, as jsonschema validates it; the
strict form forbids unknown fields, which the API server would silently prune."""

from __future__ import annotations

import copy
from typing import Any


def closed(node: Any) -> None:
    """Every object with declared properties refuses others (in place)."""
    if isinstance(node, dict):
        if "properties" in node and "additionalProperties" not in node:
            node["additionalProperties"] = False
        for value in node.values():
            closed(value)
    elif isinstance(node, list):
        for value in node:
            closed(value)


def version_schema(crd: dict[str, Any], version: str, strict: bool) -> dict[str, Any]:
    [found] = [v for v in crd["spec"]["versions"] if v["name"] == version]
    assert found["served"], f"{version} is not served by this CRD"
    schema: dict[str, Any] = copy.deepcopy(found["schema"]["openAPIV3Schema"])
    if strict:
        closed(schema)
    return schema
