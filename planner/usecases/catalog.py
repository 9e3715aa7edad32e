"""Add a model to the user's catalog (``planner catalog add-model``): a Hugging Face
``config.json`` read (bounded: 1 MiB), every field checked
(:func:`planner.latency.catalog.model_from_hf_config`), and the model written into
``$PLANNER_HOME/catalog/models.csv`` (atomically, never through a link), which the catalog
loader merges over the bundled ``data/catalog/models.csv``."""

from __future__ import annotations

import hashlib
import json
import stat
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from planner.access import Action, require
from planner.common.files import link_message, write_text_atomic
from planner.common.text import shown
from planner.errors import UsageError
from planner.latency.catalog import (
    HF_CONFIG_MAX_BYTES,
    MODEL_COLUMNS,
    ModelConfigError,
    ModelSpec,
    _rows,
    check_model_aliases,
    check_model_name,
    load_catalog,
    load_models,
    model_from_hf_config,
    model_row,
    models_csv,
    user_models_path,
)


@dataclass(frozen=True)
class AddedModel:
    """A model written into the user's catalog, and what it replaced (``bundled``: a bundled
    model of that name, now overridden; ``user``: the user's earlier entry; None: new)."""

    model: ModelSpec
    path: Path
    replaced: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self.model),
            "total_params": self.model.total_params,
            "active_params": self.model.active_params,
            "catalog_file": str(self.path),
            "replaced": self.replaced,
        }


def read_config(path: Path) -> tuple[dict[str, Any], str]:
    """The JSON object in ``path`` and its SHA-256: a regular file of at most 1 MiB of UTF-8
    JSON, or a :class:`ModelConfigError` naming the file and what is wrong."""
    where = f"--config {path}"
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ModelConfigError(f"{where}: no such file") from None
    except OSError as exc:
        raise ModelConfigError(f"{where}: cannot read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        raise ModelConfigError(f"{where}: not a regular file (give a config.json)")
    try:
        with path.open("rb") as handle:
            data = handle.read(HF_CONFIG_MAX_BYTES + 1)
    except OSError as exc:
        raise ModelConfigError(f"{where}: cannot read ({exc.strerror or exc})") from None
    if len(data) > HF_CONFIG_MAX_BYTES:
        raise ModelConfigError(
            f"{where}: larger than {HF_CONFIG_MAX_BYTES // (1 << 20)} MiB; a Hugging Face "
            "config.json is a few KiB (is it the weights?)"
        )
    try:
        config = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise ModelConfigError(f"{where}: not UTF-8 text (a config.json is JSON)") from None
    except json.JSONDecodeError as exc:
        raise ModelConfigError(
            f"{where}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    if not isinstance(config, dict):
        raise ModelConfigError(f"{where}: expected a JSON object of the model's fields")
    return config, hashlib.sha256(data).hexdigest()


def _default_name(config: dict[str, Any], where: str) -> str:
    """The name a config gives itself (the last part of ``_name_or_path``, lower case)."""
    given = config.get("_name_or_path")
    if isinstance(given, str) and given.strip():
        name = given.strip().rstrip("/").rsplit("/", 1)[-1].lower()
        try:
            return check_model_name(name, "the config's _name_or_path")
        except ModelConfigError:
            pass
    raise ModelConfigError(f"{where}: the config names no model (_name_or_path): give --name")


def _user_rows(path: Path) -> list[dict[str, str]]:
    """The rows already in the user's catalog file (checked whole: a broken file is an error,
    never overwritten)."""
    if not path.exists():
        return []
    load_models(path)  # every row valid, or a CatalogError naming the file and row
    return _rows(path, MODEL_COLUMNS)


def _check_free_names(model: ModelSpec) -> str | None:
    """What a model of this name replaces; an alias another model already answers to is an
    error (a name must mean one model)."""
    models = load_catalog().models
    replaced = None
    for other in models.entries:
        if other.name.lower() == model.name.lower():
            replaced = "user" if other.source.startswith("planner catalog add-model") else "bundled"
            continue
        keys = {k.lower() for k in (other.name, *other.aliases)}
        for key in (model.name, *model.aliases):
            if key.lower() in keys:
                raise UsageError(
                    f"{shown(key)} already names the model {other.name}; choose another "
                    "--name or --aliases"
                )
    return replaced


def add_model(
    config_path: Path, name: str | None = None, aliases: Sequence[str] = ()
) -> AddedModel:
    """Read ``config_path`` (a Hugging Face config.json), check every field, and write the model
    it describes into the user's catalog as ``name`` (default: the config's own name) with
    ``aliases``; later ``planner latency --model NAME`` and every other command find it."""
    require(Action.CALIBRATE)
    config, digest = read_config(config_path)
    where = f"--config {config_path}"
    chosen = check_model_name(name) if name is not None else _default_name(config, where)
    source = f"planner catalog add-model: {config_path.name} (sha256 {digest[:16]})"
    model = model_from_hf_config(config, where, chosen, check_model_aliases(aliases), source)
    target = user_models_path()
    for link in (target.parent, target):
        if link.is_symlink():
            raise UsageError(link_message(link, "the user catalog"))
    replaced = _check_free_names(model)
    rows = [r for r in _user_rows(target) if r["name"].strip().lower() != model.name.lower()]
    rows.append(model_row(model, datetime.now(UTC).date().isoformat()))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"the user catalog {target.parent}: cannot create it ({exc.strerror or exc}); set "
            "PLANNER_HOME to a folder planner may write to"
        ) from None
    write_text_atomic(target, models_csv(rows), "the user catalog")
    return AddedModel(model, target, replaced)
