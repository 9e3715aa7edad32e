"""The models of a request log, mapped to catalog models.

A gateway's log names its models as the serving stack calls them
(``meta-llama/Llama-3.1-70B-Instruct``, ``llama3.1:8b``, ``Qwen2.5-7B-Instruct-AWQ``); the planner
sizes catalog models (``llama-3.1-70b``). :func:`resolve_models` maps each log name to a catalog
model (a ``--model-map`` entry first, then the catalog's names and aliases, then normalised
forms of the name) and says what it could not map; :class:`ModelResolution` answers which log
names make up one catalog model, so a command plans only that model's requests. A name of a
proprietary model (``gpt-4o-mini``: no catalog model, but a per-token API prices it; the caller
says which names are, ``api_model_of``) is kept apart in ``proprietary``, and ``--substitute
LOGNAME=CATALOG`` names the catalog model served in its place.

Pure: no store, no CLI; the counts come from :func:`planner.store.requests.model_counts`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from planner.common.text import closest, shown
from planner.errors import UsageError

UNMAPPED_CHOICES = ("error", "skip")
#: the most unmapped names an error lists one by one (then "and N more")
LISTED_NAMES = 10

# Serving-name decorations that do not change the architecture the planner sizes: the tuning
# (-Instruct, -chat), the packaging (-hf, -GGUF), the quantisation (-AWQ, -FP8, -GPTQ, ...; the
# precision is --precision's) and a release tag (-v0.3, -Turbo). Stripped from the end, repeatedly.
_SUFFIX = re.compile(
    r"[-.](instruct|chat|hf|it|base|turbo|gguf|awq|gptq|fp8|fp16|bf16|int4|int8|"
    r"w4a16|w8a8|w8a16|w4a4|nvfp4|mxfp4|4bit|8bit|bnb-4bit|dynamic|quantized|"
    r"q\d(-[a-z0-9]{1,2})*|v\d+(\.\d+)*)$"
)
# An Ollama tag's size: llama3.1:8b, mixtral:8x7b, qwen2.5:0.5b-instruct-q4_K_M
_OLLAMA_SIZE = re.compile(r"(\d+x\d+(\.\d+)?[bm]|\d+(\.\d+)?[bm])\b")


def _catalog_keys() -> dict[str, str]:
    """Every catalog model's name and aliases, lower-case -> its canonical name (the catalog's
    ``Table`` matches case-insensitively too)."""
    from planner.latency.catalog import load_catalog  # the catalog module: only when resolving

    return {
        key.strip().lower(): entry.name
        for entry in load_catalog().models.entries
        for key in (entry.name, *entry.aliases)
    }


def _catalog_names() -> list[str]:
    from planner.latency.catalog import load_catalog

    return load_catalog().models.names()


def canonical_model(name: str, option: str = "--model") -> str:
    """The canonical catalog name of model ``name`` (a name or an alias, any case); an unknown
    one is a UsageError naming ``option`` and the closest catalog models."""
    found = _catalog_keys().get(name.strip().lower())
    if found is None:
        raise UsageError(
            f"{option} {shown(name)}: not a catalog model; known models: "
            f"{closest(name[:80], _catalog_names())} (see `planner catalog models`)"
        )
    return found


_MAP = (
    "LOGNAME=CATALOG, a model name as the log has it and the catalog model it is, e.g. "
    "meta-llama/Llama-3.1-8B-Instruct=llama-3.1-8b"
)
_PAIR_HELP = {
    "--substitute": "LOGNAME=CATALOG, a model name as the log has it (a proprietary model such "
    "as gpt-4o-mini) and the catalog model to serve in its place, e.g. gpt-4o-mini=llama-3.1-8b",
}


def parse_model_map(values: Sequence[str], option: str = "--model-map") -> dict[str, str]:
    """'LOGNAME=CATALOG' items (each value may also hold several, comma-separated) -> {log name:
    catalog model's canonical name}. The catalog name is checked against
    planner.latency.catalog.load_catalog().models (aliases allowed, canonical name returned); a bad
    item is a UsageError naming the option, the item and what was expected. ``--substitute``
    items read the same (the catalog model served in the log name's place)."""
    keys: dict[str, str] | None = None
    mapping: dict[str, str] = {}
    for value in values:
        for item in value.split(","):
            if not item.strip():
                continue
            # split at the last '=': a catalog name never holds one, a log name might
            log_name, sep, target = item.rpartition("=")
            log_name, target = log_name.strip(), target.strip()
            if not sep or not log_name or not target:
                raise UsageError(f"{option} {shown(item)}: expected {_PAIR_HELP.get(option, _MAP)}")
            keys = keys if keys is not None else _catalog_keys()
            model = keys.get(target.lower())
            if model is None:
                raise UsageError(
                    f"{option} {shown(item)}: {shown(target)} is not a catalog model; known "
                    f"models: {closest(target[:80], _catalog_names())} "
                    "(see `planner catalog models`)"
                )
            if mapping.get(log_name, model) != model:
                raise UsageError(
                    f"{option} {shown(item)}: {shown(log_name)} is already mapped to "
                    f"{mapping[log_name]}; give each log name once"
                )
            mapping[log_name] = model
    return mapping


def name_forms(name: str) -> list[str]:
    """The forms of a log's model name looked up in the catalog after the name itself, most
    specific first (lower-case): without an ``org/`` prefix, an Ollama tag made a size
    (``llama3.1:8b`` -> ``llama3.1-8b``, ``:latest`` dropped), ``_`` and spaces as ``-``, without
    a ``Meta-`` prefix, without tuning and quantisation suffixes, and each with and without a
    dash between the family and its version (``llama3.1-8b`` <-> ``llama-3.1-8b``)."""
    forms: list[str] = []

    def add(form: str) -> None:
        form = form.strip(" -_./")
        if form and form not in forms:
            forms.append(form)

    base = name.strip().lower()
    add(base)
    base = base.rsplit("/", 1)[-1]
    add(base)
    if ":" in base:
        head, _, tag = base.partition(":")
        size = _OLLAMA_SIZE.match(tag)
        base = f"{head}-{size.group(1)}" if size else head
        add(base)
    base = re.sub(r"[\s_]+", "-", base)
    add(base)
    if base.startswith("meta-"):
        base = base.removeprefix("meta-")
        add(base)
    while (suffix := _SUFFIX.search(base)) is not None and suffix.start() > 0:
        base = base[: suffix.start()]
        add(base)
    for form in list(forms):
        add(re.sub(r"^([a-z]+)(\d)", r"\1-\2", form))  # llama3.1-8b -> llama-3.1-8b
        add(re.sub(r"^([a-z]+)-(\d)", r"\1\2", form))  # qwen-2.5-7b -> qwen2.5-7b
    return forms


def catalog_model_of(name: str, keys: Mapping[str, str] | None = None) -> str | None:
    """The catalog model (canonical name) a log's model name is, by the catalog's names and
    aliases and then :func:`name_forms`; None when none matches."""
    keys = keys if keys is not None else _catalog_keys()
    for form in name_forms(name):
        found = keys.get(form)
        if found is not None:
            return found
    return None


#: a log's model name is quoted whole up to the store's limit (200 characters): two long names
#: that differ only near their end must not read alike in a message
NAME_CHARS = 200


def shown_name(name: str | None) -> str:
    """A log's model name for a message (quoted, safe for hostile text, whole up to
    :data:`NAME_CHARS`)."""
    return "(no model)" if name is None else shown(name, NAME_CHARS)


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "0.0%"


def _most_first(counts: Mapping[str | None, int]) -> list[tuple[str | None, int]]:
    return sorted(counts.items(), key=lambda item: (-item[1], item[0] or ""))


@dataclass(frozen=True)
class ModelResolution:
    """A log's model names mapped to catalog models: which log names are which catalog model,
    how many requests each has, and which were left out."""

    catalog_of: dict[str | None, str]  # log name (None: logged without a model) -> catalog model
    counts: dict[str | None, int]  # requests per log name (all of them, mapped or not)
    skipped: dict[str | None, int]  # log names left out (unmapped, unmapped="skip"), requests each
    source: str  # e.g. "dataset 'multi'", for messages
    # log names of proprietary models (no catalog model; per-token APIs price them) -> the
    # model as the API price sheet names it (gpt-4o-mini-2024-07-18 -> gpt-4o-mini)
    proprietary: dict[str | None, str] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Requests in all (mapped or not)."""
        return sum(self.counts.values())

    @property
    def skipped_requests(self) -> int:
        return sum(self.skipped.values())

    @property
    def skipped_share(self) -> float:
        """The share of all requests left out, 0..1."""
        total = self.total
        return self.skipped_requests / total if total else 0.0

    def models(self) -> list[str]:
        """The catalog models, most requests first."""
        totals: dict[str, int] = {}
        for log_name, model in self.catalog_of.items():
            totals[model] = totals.get(model, 0) + self.counts.get(log_name, 0)
        return sorted(totals, key=lambda m: (-totals[m], m))

    def _canonical(self, model: str) -> str:
        """``model`` as this resolution names it: itself when mapped, else its canonical
        catalog name (an alias given), else as given."""
        if model in self.catalog_of.values():
            return model
        found = _catalog_keys().get(model.strip().lower())
        return found if found is not None else model

    def api_models(self) -> list[str]:
        """The proprietary models (as the API price sheet names them), most requests first."""
        totals: dict[str, int] = {}
        for log_name, model in self.proprietary.items():
            totals[model] = totals.get(model, 0) + self.counts.get(log_name, 0)
        return sorted(totals, key=lambda m: (-totals[m], m))

    def api_log_names(self, model: str) -> list[str | None]:
        """The log names of proprietary model ``model`` (any case), most requests first."""
        wanted = model.strip().lower()
        names = [n for n, m in self.proprietary.items() if m.lower() == wanted]
        return sorted(names, key=lambda n: (-self.counts.get(n, 0), n or ""))

    def requests_of(self, model: str) -> int:
        """The requests of catalog model ``model`` (a name or an alias)."""
        return sum(self.counts.get(n, 0) for n in self.log_names(model))

    def log_names(self, model: str) -> list[str | None]:
        """The log names mapped to catalog model ``model`` (a name or an alias), most requests
        first."""
        model = self._canonical(model)
        names = [n for n, m in self.catalog_of.items() if m == model]
        return sorted(names, key=lambda n: (-self.counts.get(n, 0), n or ""))

    def skipped_note(self) -> str | None:
        """What was left out, in words (e.g. "left out 1,234 requests (6.4%) of models not in
        the catalog: 'foo' (1,000), 'bar' (234)"); None when nothing was."""
        if not self.skipped:
            return None
        left = self.skipped_requests
        names = ", ".join(f"{shown_name(n)} ({c:,})" for n, c in _listed(self.skipped))
        return (
            f"left out {left:,} requests ({_share(left, self.total)}) of models not in the "
            f"catalog: {names}"
        )

    def describe(self) -> str:
        """The log's catalog models with their shares, e.g. "llama-3.1-8b 75.0% (log names
        'meta-llama/Llama-3.1-8B-Instruct'), llama-3.1-70b 25.0% (...)"."""
        total = self.total
        parts = []
        for model in self.models():
            names = ", ".join(shown_name(n) for n in self.log_names(model))
            parts.append(f"{model} {_share(self.requests_of(model), total)} (log names {names})")
        for model in self.api_models():
            api_names = self.api_log_names(model)
            share = _share(sum(self.counts.get(n, 0) for n in api_names), total)
            listed = ", ".join(shown_name(n) for n in api_names)
            parts.append(f"{model} {share} (proprietary, per-token APIs only; log names {listed})")
        if self.skipped:
            parts.append(f"unmapped {_share(self.skipped_requests, total)}")
        return "; ".join(parts) if parts else "none"

    def only(self, model: str) -> ModelResolution:
        """The resolution restricted to catalog model ``model`` (a name or an alias): its log
        names and their counts, nothing skipped (the whole log's resolution says what was).
        A log without a request of it is a UsageError listing the log's models and shares."""
        wanted = self._canonical(model)
        names = self.log_names(wanted)
        api_names = self.api_log_names(model)
        if not names and any(self.counts.get(n, 0) for n in api_names):
            # a proprietary model: its log names, no catalog model
            return ModelResolution(
                {},
                {n: self.counts.get(n, 0) for n in api_names},
                {},
                self.source,
                {n: self.proprietary[n] for n in api_names},
            )
        if not names or not self.requests_of(wanted):
            raise UsageError(
                f"{self.source} has no requests of model {shown(model)}; its models: "
                f"{self.describe()}. Pick one of them with --model, or map a log name to "
                f"{shown(model)} with --model-map LOGNAME={wanted}"
            )
        return ModelResolution(
            {n: wanted for n in names},
            {n: self.counts.get(n, 0) for n in names},
            {},
            self.source,
        )

    def to_dict(self) -> dict[str, object]:
        """For ``--json``: each log name with its catalog model (None: unmapped) and requests."""
        return {
            "log_names": [
                {
                    "log_name": n,
                    "catalog_model": self.catalog_of.get(n),
                    "api_model": self.proprietary.get(n),
                    "requests": c,
                    "skipped": n in self.skipped,
                }
                for n, c in _most_first(self.counts)
            ],
            "skipped_requests": self.skipped_requests,
            "skipped_share": self.skipped_share,
        }


def _listed(counts: Mapping[str | None, int]) -> Iterator[tuple[str | None, int]]:
    yield from _most_first(counts)[:LISTED_NAMES]


def _and_more(counts: Mapping[str | None, int]) -> str:
    more = len(counts) - LISTED_NAMES
    return f", and {more:,} more" if more > 0 else ""


def resolve_models(
    counts: Mapping[str | None, int],
    *,
    model_map: Mapping[str, str] | None = None,
    unmapped: str = "error",
    default: str | None = None,
    source: str = "the dataset",
    api_model_of: Callable[[str], str | None] | None = None,
    substitutes: Mapping[str, str] | None = None,
) -> ModelResolution:
    """Map each log name of ``counts`` (requests per log name) to a catalog model: its
    ``substitutes`` or ``model_map`` entry (exact, else ignoring case), the catalog's name or
    alias, then its :func:`name_forms`. A name no catalog model is but ``api_model_of`` knows
    (a proprietary model the API price sheet prices, e.g. ``gpt-4o-mini-2024-07-18``) is in
    ``proprietary``, not unmapped. Requests without a model (None or empty) are ``default``'s
    (the model a log without a model column is of) when the log names no model at all;
    otherwise they are unmapped. Unmapped names are an error listing each one with its requests
    and share (``unmapped="error"``) or left out (``"skip"``: in ``skipped``).

    ``substitutes`` (``--substitute LOGNAME=CATALOG``) map a log name, or every log name of the
    same proprietary model (``gpt-4o-mini`` covers ``gpt-4o-mini-2024-07-18``), to the catalog
    model served in its place; one that names no model of the log is a UsageError."""
    if unmapped not in UNMAPPED_CHOICES:
        raise UsageError(f"--unmapped {shown(unmapped)}: expected {' or '.join(UNMAPPED_CHOICES)}")
    keys = _catalog_keys()
    api_of = api_model_of or (lambda _name: None)
    default_api = None
    if default is not None and keys.get(default.strip().lower()) is None:
        default_api = api_of(default)
    default_model = canonical_model(default) if default is not None and not default_api else None
    by_name: dict[str | None, int] = {}
    for name, count in counts.items():
        key = name if name and name.strip() else None  # '' and None: logged without a model
        by_name[key] = by_name.get(key, 0) + int(count)
    mapped = substituted_names(by_name, substitutes or {}, api_of, source)
    mapped_by_lower = {k.strip().lower(): v for k, v in (model_map or {}).items()}
    named = any(n is not None for n in by_name)
    catalog_of: dict[str | None, str] = {}
    proprietary: dict[str | None, str] = {}
    missing: dict[str | None, int] = {}
    for name, count in by_name.items():
        api_model = None
        if name is None:
            model = default_model if not named else None
            api_model = default_api if not named else None
        elif name in mapped:
            model = mapped[name]
        elif model_map and name in model_map:
            model = model_map[name]
        elif name.strip().lower() in mapped_by_lower:
            model = mapped_by_lower[name.strip().lower()]
        else:
            model = catalog_model_of(name, keys)
            api_model = api_of(name) if model is None else None
        if model is not None:
            catalog_of[name] = model
        elif api_model is not None:
            proprietary[name] = api_model
        else:
            missing[name] = count
    if missing and unmapped == "error":
        raise UsageError(_unmapped_message(missing, sum(by_name.values()), source, default, named))
    return ModelResolution(catalog_of, by_name, missing, source, proprietary)


def substituted_names(
    counts: Mapping[str | None, int],
    substitutes: Mapping[str, str],
    api_model_of: Callable[[str], str | None],
    source: str,
) -> dict[str, str]:
    """{log name: catalog model} for ``--substitute LOGNAME=CATALOG`` items: the log names
    equal to LOGNAME (ignoring case) or of the same proprietary model. A LOGNAME matching no
    log name is a UsageError listing the log's names."""
    found: dict[str, str] = {}
    names = [n for n in counts if n is not None]
    if not names:
        return found  # a log without model names: its requests are the model asked for
    for given, catalog in substitutes.items():
        api_model = api_model_of(given)
        matched = [
            n
            for n in names
            if n.strip().lower() == given.strip().lower()
            or (api_model is not None and (api_model_of(n) or "").lower() == api_model.lower())
        ]
        if not matched:
            logged: dict[str | None, int] = {n: c for n, c in counts.items() if n is not None}
            listed = ", ".join(f"{shown_name(n)} ({c:,})" for n, c in _listed(logged))
            raise UsageError(
                f"--substitute {shown(given + '=' + catalog, NAME_CHARS)}: {source} has no "
                f"requests of model {shown_name(given)}; its model names (requests): "
                f"{listed or 'none'}{_and_more(logged)}"
            )
        for name in matched:
            found[name] = catalog
    return found


def _unmapped_message(
    missing: Mapping[str | None, int],
    total: int,
    source: str,
    default: str | None,
    named: bool,
) -> str:
    left = sum(missing.values())
    listed = ", ".join(
        f"{shown_name(n)} ({c:,} requests, {_share(c, total)})" for n, c in _listed(missing)
    )
    plural = "s are" if len(missing) > 1 else " is"
    example = next((n for n, _ in _most_first(missing) if n is not None), None)
    hint = (
        f" (e.g. --model-map {shown(example + '=' + (default or 'llama-3.1-8b'), NAME_CHARS)})"
        if example is not None
        else ""
    )
    if None not in missing:
        no_model = ""
    elif named:
        no_model = "; requests logged without a model are unmapped when the log names models too"
    else:
        no_model = "; the log names no model: give the model its requests are of with --model"
    return (
        f"{source}: {len(missing):,} model name{plural} not in the catalog: "
        f"{listed}{_and_more(missing)}{no_model}. Map each to a catalog "
        f"model with --model-map LOGNAME=CATALOG{hint}; see `planner catalog models`; or leave "
        f"their {left:,} requests ({_share(left, total)} of {total:,}) out with --unmapped skip"
    )
