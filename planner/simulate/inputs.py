"""What a what-if simulation starts from, checked in one place: ``planner simulate`` and the
dashboard's What-if page both describe a run as a :class:`WhatIf` and simulate it through
:func:`planner.usecases.simulate.simulate`, which checks it here (the settings, the fleet, the
prices and the targets) before it loads anything.

Every number is checked before any work, with the CLI option's name in the message (Typer
takes 'nan' and 'inf' for a float option); a run too big to simulate (requests, or requests
times replicas) is refused before any request is read. Everything here takes values: nothing
reads the store.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from planner.common.text import printable, shown
from planner.errors import UsageError
from planner.latency.engines import Engine, get_engine
from planner.latency.predict import check_kv_cache, check_memory_utilization
from planner.simulate.engine import ADMISSION_POLICIES
from planner.simulate.fleet import Autoscaler, FleetConfig, Overflow
from planner.simulate.metrics import SLO
from planner.simulate.run import ServingSpec
from planner.simulate.workload import OVER_LENGTH_MODES
from planner.workload.rates import RateCurve
from pricing.model import PricePoint, PurchaseOption

DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|m|min)?\s*$")
MAX_DURATION_S = 7 * 24 * 3600.0  # a latency target or a start-up time of more than a week
# Requests a run may simulate unless --max-requests says more: about 20,000 requests simulate
# per second, so the default is minutes of work and a few GB of memory at most.
DEFAULT_MAX_REQUESTS = 10_000_000
# A fleet may have one replica per this many requests --max-requests allows (100,000 replicas
# by default): each holds about 2 KB of queues and caches before its requests. Time is not the
# limit: a request costs O(log replicas) (fleet_cost_factor).
REQUESTS_PER_REPLICA = 100
SIMULATED_REQUESTS_PER_S = 20_000
MAX_SEQS = 65_536  # --max-seqs and --static-batch: the step-time table holds one entry per seq
MAX_BATCHED_TOKENS = 1 << 24  # tokens per iteration: more than any engine schedules
MAX_SPOT_INTERRUPTIONS_PER_HOUR = 3600.0
PURCHASES = ("on-demand", "spot", "reserved")  # the simulator's purchase groups
# The API behind the fleet (--api-overflow-queue): its latency medians by default, as in
# `planner recommend`'s overflow plan, and the most each may be.
DEFAULT_API_TTFT_S = 0.5
DEFAULT_API_TPOT_S = 0.012
MAX_API_TTFT_S = 600.0
MAX_API_TPOT_S = 10.0
MAX_API_QUEUE = 1_000_000
# How a message names each group's price: the CLI's options (the dashboard passes its labels).
PRICE_OPTIONS = {
    "on-demand": "--price-per-hour",
    "spot": "--spot-price-per-hour",
    "reserved": "--reserved-price-per-hour",
}


# --- parsing and checking what a user typed ---------------------------------------------------


def parse_duration(option: str, text: str | None, *, positive: bool = False) -> float | None:
    """``2s``, ``200ms``, ``1.5``, ``1m`` -> seconds (at most a week; above 0 if ``positive``)."""
    if text is None:
        return None
    match = DURATION.match(text)
    if not match:
        raise UsageError(f"{option} {shown(text)}: expected a duration such as 2s, 200ms or 1m")
    value = float(match.group(1))
    unit = match.group(2) or "s"
    seconds = value * {"ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0}[unit]
    if not math.isfinite(seconds) or seconds > MAX_DURATION_S:
        raise UsageError(f"{option} {shown(text)}: expected a duration of at most 7 days")
    if positive and seconds <= 0:
        raise UsageError(f"{option} {shown(text)}: expected a duration above 0, such as 2s")
    return seconds


def check_number(
    option: str,
    value: float | None,
    *,
    low: float = 0.0,
    high: float = math.inf,
    low_open: bool = False,
    high_open: bool = False,
    expected: str,
) -> None:
    """A float option (Typer takes 'nan' and 'inf') must be finite and in its range."""
    if value is None:
        return
    above = value > low if low_open else value >= low
    below = value < high if high_open else value <= high
    if not (math.isfinite(value) and above and below):
        raise UsageError(f"{option} {value:g}: expected {expected}")


def class_slos(classes: tuple[str, ...], items: Iterable[str], default: SLO) -> dict[str, SLO]:
    """Targets for every class: ``default``, overridden by ``--slo CLASS:ttft=1s,tpot=50ms``
    options."""
    slos: dict[str, SLO] = {name: default for name in classes}
    for item in items:
        name, sep, spec = item.partition(":")
        if not sep or not name:
            raise UsageError(f"--slo {shown(item)}: expected CLASS:ttft=2s,tpot=100ms,e2e=30s")
        targets: dict[str, float | None] = {
            "ttft_s": default.ttft_s,
            "tpot_s": default.tpot_s,
            "e2e_s": default.e2e_s,
        }
        for part in spec.split(","):
            key, eq, value = part.partition("=")
            if key.strip() not in ("ttft", "tpot", "e2e") or not eq:
                raise UsageError(f"--slo {shown(item)}: expected ttft=, tpot= or e2e= targets")
            targets[f"{key.strip()}_s"] = parse_duration(
                f"--slo {shown(name)} {key.strip()}", value, positive=True
            )
        slos[name] = SLO(**targets)
    unknown = [name for name in slos if name not in classes]
    if unknown:
        raise UsageError(
            f"--slo: unknown class {shown(unknown[0])}; "
            f"the workload's classes: {', '.join(classes)}"
        )
    return slos


def parse_rate_limits(items: Iterable[str]) -> dict[str, tuple[float, float]]:
    """``--rate-limit CLASS=RPS[:BURST]`` options -> {class: (requests/s, burst)}."""
    limits = {}
    for item in items:
        name, sep, spec = item.partition("=")
        rate, colon, burst = spec.partition(":")
        try:
            limits[name] = (float(rate), float(burst) if colon else float(rate))
        except ValueError:
            raise UsageError(
                f"--rate-limit {shown(item)}: expected CLASS=RPS[:BURST], e.g. batch=5:20"
            ) from None
        rps, size = limits[name]
        if not (sep and name and math.isfinite(rps) and rps > 0):
            raise UsageError(
                f"--rate-limit {shown(item)}: expected CLASS=RPS[:BURST] with RPS a finite "
                "number > 0, BURST >= 1"
            )
        if not (math.isfinite(size) and size >= 1):
            raise UsageError(
                f"--rate-limit {shown(item)}: expected CLASS=RPS[:BURST] with BURST a finite "
                "number >= 1"
            )
    return limits


def check_rate_limit_classes(
    limits: Mapping[str, tuple[float, float]], classes: tuple[str, ...]
) -> None:
    unknown = [name for name in limits if name not in classes]
    if unknown:
        raise UsageError(
            f"--rate-limit: unknown class {shown(unknown[0])}; "
            f"the workload's classes: {', '.join(map(printable, classes))}"
        )


def parse_schedule(text: str | None) -> list[int] | None:
    """``--schedule``: replicas per hour, ``2,2,4,6`` (commas or spaces), or a file of them."""
    if text is None:
        return None
    path = Path(text)
    raw = text
    if text.strip() and path.exists():
        if not path.is_file():
            raise UsageError(f"--schedule {shown(text)}: not a file of replica counts")
        try:
            raw = path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(
                f"--schedule {shown(text)}: cannot read it as a text file of replica counts ({exc})"
            ) from None
    return schedule_counts(raw, text)


def schedule_counts(raw: str, shown_as: str | None = None) -> list[int]:
    """Replica counts per hour from text such as ``2,2,4,6`` (commas or spaces)."""
    try:
        counts = [int(x) for x in re.split(r"[,\s]+", raw.strip()) if x]
    except ValueError:
        raise UsageError(
            "--schedule: expected replica counts per hour (e.g. 2,2,4,6) or a file of them, "
            f"got {shown(raw if shown_as is None else shown_as)}"
        ) from None
    if not counts or min(counts) < 0:
        raise UsageError("--schedule: expected non-negative replica counts, one per hour")
    return counts


def fleet_size(fleet: FleetConfig) -> int:
    """The most replicas the run may have up at once."""
    if fleet.schedule:
        return max(fleet.schedule)
    if fleet.autoscaler is not None:
        return max(fleet.autoscaler.max_replicas, fleet.autoscaler.min_replicas)
    return sum(fleet.replicas.values())


def check_fleet(fleet: int, max_requests: int) -> None:
    """Refuse, before the work, a fleet too big for the memory a run may take."""
    allowed = max(1, max_requests // REQUESTS_PER_REPLICA)
    if fleet > allowed:
        raise UsageError(
            f"a fleet of up to {fleet:,} replicas is over the {allowed:,} that --max-requests "
            f"{max_requests:,} allows (one replica per {REQUESTS_PER_REPLICA} requests; each "
            "holds its own queues and caches); use fewer replicas, or raise --max-requests to "
            "run it anyway"
        )


def fleet_cost_factor(fleet: int) -> float:
    """About what a simulated request costs through ``fleet`` replicas, as a multiple of its
    cost on one: O(log replicas), fitted to docs/benchmarks.md (1.2x at 10 replicas, 1.4x at
    60, 1.6x at 300, 1.8-2.1x at 1,000)."""
    return 1 + math.log2(max(1, fleet)) / 10


def estimated_seconds(requests: float, fleet: int) -> float:
    """About how long a run of ``requests`` through ``fleet`` replicas takes to simulate."""
    return requests * fleet_cost_factor(fleet) / SIMULATED_REQUESTS_PER_S


# --- load models: how the requests arrive ---------------------------------------------------

ARRIVALS = ("poisson", "constant", "bursty")
DEFAULT_BURSTY_CV = 2.0  # --arrival bursty without --cv


def arrival_process(
    arrival: str | None, cv: float | None, *, has_rates: bool
) -> tuple[float, bool]:
    """``--arrival`` and ``--cv`` -> (the renewal process's coefficient of variation, whether
    arrivals are evenly spaced). Without ``--arrival``, ``--cv`` alone decides (default 1:
    Poisson), as it always has; ``poisson`` is CV 1, ``constant`` evenly spaced at the rate,
    ``bursty`` a gamma process of CV ``--cv`` (default 2, above 1)."""
    if arrival is None:
        return (1.0 if cv is None else cv), False
    name = arrival.strip().lower()
    if name not in ARRIVALS:
        raise UsageError(f"--arrival {shown(arrival)}: expected {', '.join(ARRIVALS)}")
    if not has_rates:
        raise UsageError(
            f"--arrival {name} draws arrivals on --rates; a --dataset replay keeps the log's own "
            "arrival times (scale them with --load-scale)"
        )
    if name == "poisson":
        if cv is not None and cv != 1.0:
            raise UsageError(
                f"--arrival poisson has inter-arrival CV 1; --cv {cv:g} is another process "
                "(use --arrival bursty --cv N for bursts)"
            )
        return 1.0, False
    if name == "constant":
        if cv is not None:
            raise UsageError(
                f"--arrival constant sends at evenly spaced times; --cv {cv:g} does not apply"
            )
        return 1.0, True
    chosen = DEFAULT_BURSTY_CV if cv is None else cv
    check_number("--cv", chosen, low_open=True, high=100.0, expected="a number in (0, 100]")
    if chosen <= 1.0:
        raise UsageError(
            f"--arrival bursty --cv {chosen:g}: bursts need an inter-arrival CV above 1 "
            "(1 is Poisson, --arrival constant is evenly spaced)"
        )
    return chosen, False


def check_closed_loop(
    whatif: WhatIf, *, arrival_given: bool = False, cv_given: bool = False
) -> None:
    """Refuse, before any work, what a closed loop of clients (``--clients``) cannot run: the
    fleet is a fixed number of replicas (on-demand and reserved) behind a least-outstanding
    router, and the load is the clients' (not a replay's arrival times or a rate's process)."""
    fleet, demand = whatif.fleet, whatif.demand
    given = [
        option
        for option, present in (
            ("--schedule", fleet.schedule is not None),
            ("--autoscale", fleet.autoscale),
            ("--spot", fleet.spot > 0),
            ("--spot-interruptions-per-hour", fleet.spot_interruptions_per_hour > 0),
            ("--rate-limit", bool(fleet.rate_limits)),
            ("--response-cache-hit-rate", fleet.response_cache_hit_rate > 0),
            ("--api-overflow-queue", fleet.api is not None),
            ("--router", fleet.router != "least-requests"),
            ("--load-scale", demand.load_scale != 1.0),
            ("--arrival", arrival_given),
            ("--cv", cv_given),
        )
        if present
    ]
    if given:
        raise UsageError(
            f"--clients runs a closed loop on a fixed fleet (--replicas, --reserved) behind a "
            f"least-requests router, its load made by the clients; {', '.join(given)} "
            "cannot go with it (drop --clients for an open-loop run)"
        )
    if fleet.replicas + fleet.reserved < 1:
        raise UsageError("--clients needs at least one replica (--replicas or --reserved)")


# --- the run's description --------------------------------------------------------------------


@dataclass(frozen=True)
class DemandSource:
    """What arrives: a stored dataset replayed (``dataset``, at ``load_scale``, optionally the
    window ``[start, end)``), or arrivals drawn on an hourly rate curve (``rates``: a curve in
    memory, already at the load wanted, or a CSV ``ds,y`` file) with request lengths drawn from
    dataset ``tokens_from`` and inter-arrival coefficient of variation ``cv``. Of a dataset that
    logs several models, only the served model's requests are taken (``model_map`` and
    ``unmapped`` say how its names map to catalog models: planner.usecases.load.pick_models)."""

    dataset: str | None = None
    rates: RateCurve | Path | None = None
    rates_label: str | None = None  # how messages name the curve (default: the file's path)
    tokens_from: str | None = None
    cv: float = 1.0
    load_scale: float = 1.0
    start: datetime | None = None
    end: datetime | None = None
    constant_rate: bool = False  # with rates: evenly spaced arrivals (cv unused)
    # a log of several models: its names as logged -> catalog models (--model-map), and what
    # to do with names that map to none (--unmapped: error, or skip their requests)
    model_map: Mapping[str, str] = field(default_factory=dict)
    unmapped: str = "error"


@dataclass(frozen=True)
class ApiOverflow:
    """A per-token API behind the fleet (``--api-overflow-queue``): an arrival goes to it when
    every replica up already holds ``queue`` requests or more (or none is up), unless its rate
    limit (``rpm`` requests, ``tpm`` tokens a minute; None: none) is spent. It answers with its
    own latency, medians ``ttft_s`` and ``tpot_s`` with log-normal spread ``sigma``
    (planner.simulate.fleet.Overflow). ``price``, ``PROVIDER/OFFER``, or ``provider`` (its best
    offer for the model served) prices the tokens it took with the API prices in force; neither:
    not priced."""

    queue: int
    ttft_s: float = DEFAULT_API_TTFT_S
    tpot_s: float = DEFAULT_API_TPOT_S
    rpm: float | None = None
    tpm: float | None = None
    sigma: float = 0.3
    price: str | None = None
    provider: str | None = None

    def overflow(self) -> Overflow:
        """The simulator's API (the settings checked first, named by their options)."""
        check_api(self)
        return Overflow(self.queue, self.ttft_s, self.tpot_s, self.sigma, self.rpm, self.tpm)


def check_api(api: ApiOverflow | None) -> None:
    """The API's settings, each named by its ``planner simulate`` option."""
    if api is None:
        return
    if not 0 <= api.queue <= MAX_API_QUEUE:
        raise UsageError(
            f"--api-overflow-queue {api.queue}: expected the outstanding requests per replica "
            f"at which arrivals go to the API, 0 to {MAX_API_QUEUE:,} (0: every arrival)"
        )
    check_number(
        "--api-ttft",
        api.ttft_s,
        low_open=True,
        high=MAX_API_TTFT_S,
        expected=f"the API's median time to first token, above 0 and at most {MAX_API_TTFT_S:g} s",
    )
    check_number(
        "--api-tpot",
        api.tpot_s,
        low_open=True,
        high=MAX_API_TPOT_S,
        expected=(
            f"the API's median time per output token, above 0 and at most {MAX_API_TPOT_S:g} s"
        ),
    )
    for option, limit, unit in (
        ("--api-rpm", api.rpm, "requests"),
        ("--api-tpm", api.tpm, "tokens"),
    ):
        check_number(option, limit, low_open=True, expected=f"a rate limit above 0 {unit} a minute")
    check_number("API latency spread", api.sigma, high=5.0, expected="a log-normal sigma in [0, 5]")
    if api.price is not None and api.provider is not None:
        raise UsageError(
            "--api-price names one offer and --api-provider picks that provider's best offer for "
            "the model: give one of them"
        )
    if api.price is not None:
        provider, slash, offer = api.price.strip().partition("/")
        if not (slash and provider.strip() and offer.strip()):
            raise UsageError(
                f"--api-price {shown(api.price)}: expected PROVIDER/OFFER as `planner prices list "
                "--kind api` names it, e.g. deepinfra/meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo"
            )
    if api.provider is not None and not api.provider.strip():
        raise UsageError("--api-provider: expected a provider's name, e.g. together")


@dataclass(frozen=True)
class FleetSettings:
    """The replicas: a fixed fleet by purchase option, an hourly schedule (on-demand), or
    reactive autoscaling; spot interruptions, routing, admission control and a response cache."""

    replicas: int = 1  # on-demand, fixed fleet
    spot: int = 0
    reserved: int = 0
    schedule: tuple[int, ...] | None = None  # replicas per hour, instead of a fixed fleet
    autoscale: bool = False
    min_replicas: int = 1
    max_replicas: int = 16
    target_utilization: float | None = None  # default 0.7 unless target_queue is given
    target_queue: float | None = None
    cold_start_s: float = 45.0
    warm_start_s: float = 7.0
    warm_pool: int = 0
    spot_interruptions_per_hour: float = 0.0
    spot_replace_s: float = 120.0
    router: str = "least-requests"
    rate_limits: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    response_cache_hit_rate: float = 0.0
    api: ApiOverflow | None = None  # a per-token API behind the fleet (None: none)

    @property
    def purchase(self) -> dict[str, int]:
        """Replicas of each purchase option in a fixed fleet (options with none left out)."""
        counts = {"on-demand": self.replicas, "spot": self.spot, "reserved": self.reserved}
        return {name: count for name, count in counts.items() if count}


@dataclass(frozen=True)
class ReplicaPrices:
    """$ per replica-hour by purchase option; None: no price (a run priced at all needs one
    for every option its fleet uses)."""

    on_demand: float | None = None
    spot: float | None = None
    reserved: float | None = None

    def given(self) -> dict[str, float]:
        prices = {"on-demand": self.on_demand, "spot": self.spot, "reserved": self.reserved}
        return {name: price for name, price in prices.items() if price is not None}


@dataclass(frozen=True)
class Disaggregation:
    """A disaggregated fleet (``--prefill-replicas``/``--decode-replicas``): each role's
    replicas and, where they differ from the what-if's serving, its GPU and TP; the KV link
    (None: the GPU's NVLink when both roles fit one node) and which side yields the first token
    (None: by engine)."""

    prefill_replicas: int
    decode_replicas: int
    prefill_tp: int | None = None
    decode_tp: int | None = None
    prefill_gpu: str | None = None
    decode_gpu: str | None = None
    kv_link: str | None = None
    first_token: str | None = None

    def __post_init__(self) -> None:
        for option, count in (
            ("--prefill-replicas", self.prefill_replicas),
            ("--decode-replicas", self.decode_replicas),
        ):
            if count < 1:
                raise UsageError(f"{option} {count}: a disaggregated fleet needs at least 1")


@dataclass(frozen=True)
class WhatIf:
    """One simulation: what each replica runs, what arrives, the fleet, prices and targets."""

    serving: ServingSpec
    demand: DemandSource
    fleet: FleetSettings = FleetSettings()
    prices: ReplicaPrices = ReplicaPrices()
    slo: SLO = field(default_factory=SLO)  # every class's targets
    class_slos: tuple[str, ...] = ()  # per-class overrides: CLASS:ttft=1s,tpot=50ms
    profile: str | None = None  # calibration profile (default: the best for GPU and engine)
    seed: int = 0
    max_requests: int = DEFAULT_MAX_REQUESTS
    requests: int | None = None  # simulate only the first this many (None: all)
    max_model_len: int | None = None  # the engine's longest prompt (None: no limit)
    over_length: str = "truncate"  # a longer prompt is cut (truncate) or refused (refuse)
    price_names: Mapping[str, str] = field(default_factory=lambda: dict(PRICE_OPTIONS))
    disaggregation: Disaggregation | None = None  # prefill and decode apart (None: aggregated)


def check_settings(
    *,
    has_dataset: bool,
    has_rates: bool,
    policy: str,
    memory_utilization: float | None,
    kv_cache: str | None,
    engine: str,
    cv: float,
    load_scale: float,
    prefix_hit_rate: float,
    response_cache_hit_rate: float,
    spot_interruptions_per_hour: float,
    target_utilization: float | None,
    target_queue: float | None,
    prices: ReplicaPrices,
    admission: str | None = None,
    kv_watermark: float | None = None,
) -> tuple[str | None, Engine]:
    """Every setting that needs no store, before any work; returns the KV-cache precision
    asked for (normalized; None: the engine's) and the engine."""
    if has_dataset == has_rates:
        raise UsageError("give exactly one of --dataset (replay) or --rates (synthetic arrivals)")
    if policy not in ("continuous", "static"):
        raise UsageError(f"--policy {shown(policy)}: expected continuous or static")
    if admission is not None and admission not in ADMISSION_POLICIES:
        raise UsageError(
            f"--admission {shown(admission)}: expected {' or '.join(ADMISSION_POLICIES)} "
            "(default: the engine's, see `planner catalog engines`)"
        )
    check_number(
        "--kv-watermark",
        kv_watermark,
        high=1.0,
        high_open=True,
        expected="a share of the KV cache in [0, 1) (vLLM's default is 0.01)",
    )
    check_memory_utilization(memory_utilization)
    kv_asked = check_kv_cache(kv_cache)
    spec = get_engine(engine)
    check_number("--cv", cv, low_open=True, high=100.0, expected="a number in (0, 100]")
    check_number(
        "--load-scale", load_scale, low_open=True, expected="a positive number (1 replays the log)"
    )
    check_number(
        "--prefix-hit-rate", prefix_hit_rate, high=1.0, high_open=True, expected="a share in [0, 1)"
    )
    check_number(
        "--response-cache-hit-rate",
        response_cache_hit_rate,
        high=1.0,
        high_open=True,
        expected="a share in [0, 1)",
    )
    check_number(
        "--spot-interruptions-per-hour",
        spot_interruptions_per_hour,
        high=MAX_SPOT_INTERRUPTIONS_PER_HOUR,
        expected=f"a rate in [0, {MAX_SPOT_INTERRUPTIONS_PER_HOUR:g}] per replica-hour",
    )
    check_number(
        "--target-utilization",
        target_utilization,
        low_open=True,
        high=1.0,
        expected="a busy share in (0, 1]",
    )
    check_number(
        "--target-queue",
        target_queue,
        low_open=True,
        high=1e6,
        expected="a positive number of outstanding requests per replica",
    )
    for option, price in (
        ("--price-per-hour", prices.on_demand),
        ("--spot-price-per-hour", prices.spot),
        ("--reserved-price-per-hour", prices.reserved),
    ):
        check_number(option, price, expected="a price in $ per replica-hour, 0 or more")
    return kv_asked, spec


def check_whatif(whatif: WhatIf) -> tuple[str | None, Engine]:
    """:func:`check_settings` on a :class:`WhatIf`, and its request count and prompt limit."""
    serving, demand, fleet = whatif.serving, whatif.demand, whatif.fleet
    if whatif.requests is not None and whatif.requests < 1:
        raise UsageError(f"--requests {whatif.requests}: expected at least 1 request")
    if whatif.max_model_len is not None and whatif.max_model_len < 1:
        raise UsageError(f"--max-model-len {whatif.max_model_len}: expected at least 1 token")
    if whatif.over_length not in OVER_LENGTH_MODES:
        raise UsageError(
            f"--over-length {shown(whatif.over_length)}: expected {' or '.join(OVER_LENGTH_MODES)}"
        )
    check_api(fleet.api)
    if fleet.api is not None and whatif.disaggregation is not None:
        raise UsageError(
            "--api-overflow-queue puts an API behind an aggregated fleet; a disaggregated run "
            "(--prefill-replicas, --decode-replicas) cannot have one yet"
        )
    return check_settings(
        has_dataset=demand.dataset is not None,
        has_rates=demand.rates is not None,
        policy=serving.policy,
        memory_utilization=serving.memory_utilization,
        kv_cache=serving.kv_cache,
        engine=serving.engine,
        cv=demand.cv,
        load_scale=demand.load_scale,
        prefix_hit_rate=serving.prefix_hit_rate,
        response_cache_hit_rate=fleet.response_cache_hit_rate,
        spot_interruptions_per_hour=fleet.spot_interruptions_per_hour,
        target_utilization=fleet.target_utilization,
        target_queue=fleet.target_queue,
        prices=whatif.prices,
        admission=serving.admission,
        kv_watermark=serving.kv_watermark,
    )


def build_fleet(settings: FleetSettings, tp: int, seed: int = 0) -> FleetConfig:
    """The simulator's fleet for ``settings`` (replicas of ``tp`` GPUs each)."""
    scaler = None
    if settings.autoscale:
        target_queue = settings.target_queue
        scaler = Autoscaler(
            min_replicas=settings.min_replicas,
            max_replicas=settings.max_replicas,
            target_utilization=(
                None if target_queue is not None else (settings.target_utilization or 0.7)
            ),
            target_queue=target_queue,
            cold_start_s=settings.cold_start_s,
            warm_start_s=settings.warm_start_s,
            warm_pool=settings.warm_pool,
        )
    return FleetConfig(
        replicas=settings.purchase,
        schedule=list(settings.schedule) if settings.schedule is not None else None,
        autoscaler=scaler,
        router=settings.router,
        gpus_per_replica=tp,
        spot_interruptions_per_hour=settings.spot_interruptions_per_hour,
        spot_replace_s=settings.spot_replace_s,
        rate_limits=dict(settings.rate_limits),
        response_cache_hit_rate=settings.response_cache_hit_rate,
        overflow=settings.api.overflow() if settings.api is not None else None,
        seed=seed,
    )


def replica_prices(
    fleet: FleetConfig, prices: ReplicaPrices, names: Mapping[str, str] = PRICE_OPTIONS
) -> dict[str, float] | None:
    """$ per replica-hour of each purchase option the fleet uses; None when no price is given
    (the run is not priced). A fleet with some prices but not all it needs is an error."""
    given = prices.given()
    used = ["on-demand"] if fleet.schedule or fleet.autoscaler is not None else list(fleet.replicas)
    missing = [name for name in used if name not in given]
    if given and missing:
        raise UsageError(
            f"the fleet has {missing[0]} replicas but no price for them; give "
            f"{names[missing[0]]} too (or no prices at all)"
        )
    return given or None


# --- demand curves --------------------------------------------------------------------------


def curve_window(curve: RateCurve, first_hour: int = 0, hours: int | None = None) -> RateCurve:
    """``hours`` hours of ``curve`` from hour ``first_hour`` (0: its first; the window ends
    with the curve)."""
    if not 0 <= first_hour < curve.hours:
        raise UsageError(
            f"hour {first_hour + 1} is outside the curve's {curve.hours:,} hours "
            f"(from {curve.start.isoformat()})"
        )
    if hours is not None and hours < 1:
        raise UsageError(f"{hours} hours: expected at least one hour of the curve")
    last = curve.hours if hours is None else first_hour + hours
    return RateCurve(
        curve.start + timedelta(hours=first_hour),
        curve.requests_per_hour[first_hour : min(last, curve.hours)],
    )


def scaled_curve(curve: RateCurve, load_scale: float) -> RateCurve:
    """The curve with every hour's requests multiplied by ``load_scale``."""
    check_number(
        "--load-scale", load_scale, low_open=True, expected="a positive number (1 replays the log)"
    )
    return RateCurve(curve.start, curve.requests_per_hour * load_scale)


# --- prices per replica-hour from the price sheet ---------------------------------------------

PER_INSTANCE_COMMITMENTS = {
    1: (PurchaseOption.RESERVED_1Y, PurchaseOption.COMMITTED_1Y),
    3: (PurchaseOption.RESERVED_3Y, PurchaseOption.COMMITTED_3Y),
}


@dataclass(frozen=True)
class InstancePrices:
    """One instance type in one region: its GPUs and the price each simulator purchase group
    would pay (spot, and reserved as the cheapest per-instance commitment of the term)."""

    provider: str
    region: str
    instance_type: str
    gpu: str
    gpu_count: int
    points: dict[str, PricePoint]  # on-demand / spot / reserved -> the price point used

    @property
    def label(self) -> str:
        return f"{self.provider}/{self.region}/{self.instance_type} ({self.gpu_count} x {self.gpu})"

    def replicas_per_instance(self, tp: int) -> int:
        return self.gpu_count // tp if tp >= 1 else 0

    def per_replica(self, tp: int) -> ReplicaPrices:
        """$ per replica-hour: the instance's price shared by the replicas of ``tp`` GPUs it
        holds."""
        share = self.replicas_per_instance(tp)
        if share < 1:
            raise UsageError(
                f"{self.instance_type} has {self.gpu_count} GPUs: too few for a replica of "
                f"{tp} (tensor parallelism)"
            )

        def price(name: str) -> float | None:
            point = self.points.get(name)
            return point.usd_per_hour / share if point is not None else None

        return ReplicaPrices(price("on-demand"), price("spot"), price("reserved"))


def sheet_instances(
    points: Iterable[PricePoint], tp: int = 1, term_years: int = 1
) -> list[InstancePrices]:
    """The instance types among ``points`` that hold whole replicas of ``tp`` GPUs and have
    an on-demand price, with the price each purchase group pays, cheapest on-demand first."""
    commitments = PER_INSTANCE_COMMITMENTS.get(term_years)
    if commitments is None:
        raise UsageError(f"a {term_years}-year term: expected 1 or 3")
    groups: dict[tuple[str, str, str], list[PricePoint]] = {}
    for point in points:
        key = (str(point.provider), point.region, point.instance_type)
        groups.setdefault(key, []).append(point)
    instances = []
    for (provider, region, instance_type), found in groups.items():
        first = found[0]
        if first.gpu_count < tp or first.gpu_count % tp:
            continue
        chosen: dict[str, PricePoint] = {}
        for name, options in (
            ("on-demand", (PurchaseOption.ON_DEMAND,)),
            ("spot", (PurchaseOption.SPOT,)),
            ("reserved", commitments),
        ):
            candidates = [p for p in found if p.purchase_option in options]
            if candidates:
                chosen[name] = min(candidates, key=lambda p: p.usd_per_hour)
        if "on-demand" in chosen:
            instances.append(
                InstancePrices(
                    provider, region, instance_type, first.gpu_model, first.gpu_count, chosen
                )
            )
    instances.sort(key=lambda i: (i.points["on-demand"].usd_per_hour / i.gpu_count, i.label))
    return instances
