"""The Recommendations page and proprietary models (issue 34, deliverable 5): a substitute typed
into the form plans the log's gpt-4o-mini requests on the chosen catalog model and prices the
API as gpt-4o-mini; a stored API-only plan (a proprietary model, no substitute) reopens saying
there is no self-hosted option, with its API bill, not "nothing met the targets"."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from streamlit.testing.v1 import AppTest

from tests.dashboard.conftest import no_exception
from tests.dashboard.test_recommendations_page import _result, _stored, _texts, _wait_until
from tests.e2e.test_cli import run
from tests.e2e.test_multi_model_log import ingest
from tests.e2e.test_proprietary_recommend_cli import MINI, ROWS


def test_a_substitute_from_the_form_is_searched_and_priced_by_the_log_name(
    empty_home: Path, page: Callable[[str], AppTest], tmp_path: Path
) -> None:
    ingest(empty_home, tmp_path, "gw", ROWS)
    at = page("recommend")
    at.selectbox(key="rec-dataset").select("gw")
    at.selectbox(key="rec-model").select("llama-3.1-8b")
    at.multiselect(key="rec-gpus").set_value(["H100-SXM"])
    at.multiselect(key="rec-precisions").set_value(["fp8"])
    at.number_input(key="rec-verify-top").set_value(1)
    at.number_input(key="rec-tighten").set_value(0)
    at.number_input(key="rec-confidence").set_value(0.0)
    at.checkbox(key="rec-compare-gpus").uncheck()
    at.checkbox(key="rec-growth-check").uncheck()
    at.text_input(key="rec-substitutes").input("gpt-4o-mini=llama-3.1-8b")
    at.run()
    at.button(key="rec-run").click().run()
    no_exception(at)
    assert not at.error, _texts(at.error)
    _wait_until(at, lambda at: len(_stored(empty_home)) == 1)
    [brief] = _stored(empty_home)
    data = _result(empty_home, brief["id"])
    assert data["substitute"] == {"log_model": "gpt-4o-mini", "catalog_model": "llama-3.1-8b"}
    assert data["winner"]["model"] == "llama-3.1-8b"
    assert data["demand"]["requests"] == sum(1 for r in ROWS if r[1] == MINI)
    assert data["api"]["offer"]["model"] == "gpt-4o-mini"
    no_exception(at)
    assert any("is your call" in text for text in _texts(at.info))


def test_an_api_only_plan_reopens_with_its_bill(
    empty_home: Path, page: Callable[[str], AppTest], tmp_path: Path
) -> None:
    ingest(empty_home, tmp_path, "gw", ROWS)
    done = run(empty_home, "recommend", "--dataset", "gw", "--model", "gpt-4o-mini",
               "--slo-ttft-p99", "2s")  # fmt: skip
    assert done.returncode == 0, done.stderr
    at = page("recommend")
    no_exception(at)
    infos = " ".join(_texts(at.info))
    assert "No self-hosted fleet" in infos and "--substitute 'gpt-4o-mini=CATALOG'" in infos
    assert not any("met the targets" in text for text in _texts(at.error))
    assert any("Per-token API" in str(h.value) for h in at.subheader)
