"""A log of several models in the store (SQLite, and PostgreSQL when configured): counts per
model name, and frames, spans, token pools and replays kept to some of its names."""

from __future__ import annotations

import pytest

from planner.errors import UsageError
from planner.ingest import IngestOptions, TimeKind, TimeSpec, TimeUnit, ingest_file
from planner.store import Store
from planner.store.queries import get_dataset
from planner.store.requests import model_counts, request_frame, request_span
from planner.usecases.load import dataset_models, from_dataset, token_pool
from tests.conftest import WriteFile

B8 = "meta-llama/Llama-3.1-8B-Instruct"
B70 = "meta-llama/Llama-3.1-70B-Instruct"
# (second, model, input tokens): 8B, 70B, no model, an unknown model
ROWS = [(i, [B8, B8, B70, "", B8, "gpt-4o"][i % 6], 100 + i) for i in range(60)]


@pytest.fixture
def multi(store: Store, write: WriteFile) -> int:
    """The log above ingested as dataset 'multi'; its id."""
    lines = ["ts,model,prompt,completion"]
    lines += [f"{1717200000 + s},{m},{n},{s % 7 + 1}" for s, m, n in ROWS]
    path = write("multi.csv", "\n".join(lines) + "\n")
    mapping = {"arrival": "ts", "input_tokens": "prompt", "output_tokens": "completion"}
    options = IngestOptions(
        format="generic",
        name="multi",
        mapping={**mapping, "model": "model"},
        time=TimeSpec(TimeKind.EPOCH, TimeUnit.S),
    )
    ingest_file(store, path, options)
    with store.session() as session:
        return get_dataset(session, "multi").id


def expected(models: set[str | None]) -> list[tuple[int, str, int]]:
    return [r for r in ROWS if (r[1] or None) in models]


def test_counts_and_filters_per_model_name(store: Store, multi: int) -> None:
    with store.session() as session:
        counts = model_counts(session, multi)
        assert counts == {B8: 30, B70: 10, None: 10, "gpt-4o": 10}
        # the window [10 s, 22 s): 12 requests
        assert (
            sum(model_counts(session, multi, 1717200010_000000, 1717200022_000000).values()) == 12
        )
        for models in ([B70], [B8, None], [None], ["gpt-4o", B70]):
            frame = request_frame(session, multi, log_models=models)
            rows = expected(set(models))
            assert frame["input_tokens"].tolist() == [n for _, _, n in rows]
            assert set(frame["model"].where(frame["model"].notna(), None)) == set(models)
            span = request_span(
                session, multi, 1717200000_000000, 1717200030_000000, log_models=models
            )
            assert span.count == len(rows)
            assert span.inside == len([r for r in rows if r[0] < 30])
            assert span.first_us == (1717200000 + rows[0][0]) * 1_000_000
        assert request_frame(session, multi, log_models=[]).empty
        assert request_span(session, multi, log_models=["nope"]).count == 0


def test_replays_and_token_pools_of_one_models_requests(store: Store, multi: int) -> None:
    with store.session() as session:
        resolution = dataset_models(session, "multi", unmapped="skip")
        assert resolution.models() == ["llama-3.1-8b", "llama-3.1-70b"]
        assert resolution.skipped == {None: 10, "gpt-4o": 10}
        names = resolution.log_names("llama-3.1-70b")
        assert names == [B70]
        workload = from_dataset(session, "multi", log_models=names)
        assert workload.input_tokens.tolist() == [n for _, _, n in expected({B70})]
        assert workload.arrival_s[0] == 0.0  # time zero: the kept requests' first arrival
        inputs, _ = token_pool(session, "multi", [B8])
        assert inputs.tolist() == [n for _, _, n in expected({B8})]
        with pytest.raises(UsageError, match="has no requests of model 'nope'"):
            from_dataset(session, "multi", log_models=["nope"])
        with pytest.raises(UsageError, match="has no requests of model 'nope' to draw"):
            token_pool(session, "multi", ["nope"])
        # the count limit reads the kept requests' count, not the log's
        with pytest.raises(UsageError, match="10 requests of model"):
            from_dataset(session, "multi", log_models=[B70], max_requests=5)
        with pytest.raises(UsageError, match=r"2 model names are not in the catalog"):
            dataset_models(session, "multi")
