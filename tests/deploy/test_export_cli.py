"""``planner export`` as a user runs it on the demo store: each target writes its files headed by
the recommendation, its date and assumptions, with the values the search verified; the export
is in the audit trail; bad options and unsafe folders are clear errors that write nothing."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped]

from planner.store import open_store
from planner.store.recommendations import list_recommendations
from planner.usecases.export import ExportRequest, export, export_zip
from tests.e2e.test_cli import run


@pytest.fixture(scope="module")
def home(demo_store_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("export-home")
    shutil.copy(demo_store_file, folder / "planner.db")
    return folder


@pytest.fixture(scope="module")
def winner(home: Path) -> dict[str, object]:
    with open_store(f"sqlite:///{home / 'planner.db'}") as store, store.session() as session:
        found: dict[str, object] = list_recommendations(session)[-1].result["winner"]
    return found


def test_an_engine_target_writes_a_script_per_pool_with_the_verified_values(
    home: Path, winner: dict[str, object], tmp_path: Path
) -> None:
    out = tmp_path / "vllm"
    result = run(home, "export", "--recommendation", "1", "--target", "vllm", "--out", str(out))
    assert result.returncode == 0, result.stderr
    [script] = sorted(out.iterdir())
    assert str(script) in result.stdout and script.name.endswith(".vllm.sh")
    assert script.stat().st_mode & 0o111  # executable
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash\n# planner recommendation #1, planned ")
    assert "# assumption: " in text
    assert f"--tensor-parallel-size {winner['tp']}" in text.replace(" \\\n    ", " ")
    assert f"--max-num-seqs {winner['max_seqs']}" in text.replace(" \\\n    ", " ")
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    # the demo was verified with TensorRT-LLM: a vLLM script says it was not checked with vLLM
    assert "note: the latency model verified this fleet with trtllm" in result.stderr


@pytest.mark.parametrize("target", ["k8s", "keda"])
def test_a_kubernetes_target_writes_manifests(home: Path, tmp_path: Path, target: str) -> None:
    out = tmp_path / target
    result = run(
        home, "export", "--recommendation", "1", "--target", target, "--out", str(out), "--json"
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["target"] == target and summary["pools"][0]["max_replicas"] >= 1
    [path] = [Path(p) for p in summary["files"]]
    assert path.read_text().startswith("# planner recommendation #1, planned ")
    kinds = [doc["kind"] for doc in yaml.safe_load_all(path.read_text()) if doc]
    assert "Deployment" in kinds and "Service" in kinds and "PodDisruptionBudget" in kinds
    assert ("HorizontalPodAutoscaler" in kinds) == (target == "k8s")
    assert ("ScaledObject" in kinds) == (target == "keda")


def test_the_export_is_in_the_audit_trail_and_the_zip_holds_the_same_files(
    home: Path, tmp_path: Path
) -> None:
    url = f"sqlite:///{home / 'planner.db'}"
    with open_store(url) as store:
        result = export(ExportRequest(1, "trtllm", tmp_path / "trt"), store.session)
        names = sorted(result.files)
        assert any(n.endswith(".trtllm.sh") for n in names)
        assert any(n.endswith(".yaml") for n in names)  # the LLM API options beside it
        with zipfile.ZipFile(io.BytesIO(export_zip(result))) as archive:
            assert sorted(n.split("/", 1)[1] for n in archive.namelist()) == names
    trail = run(home, "audit", "--action", "export", "--json")
    assert any(e["detail"] == "as trtllm" for e in json.loads(trail.stdout))


def test_bad_options_and_unsafe_folders_are_refused(home: Path, tmp_path: Path) -> None:
    bad = run(home, "export", "--recommendation", "1", "--target", "docker", "--out", str(tmp_path))
    assert bad.returncode == 2 and "--target 'docker': expected one of vllm, sglang" in bad.stderr
    missing = run(home, "export", "--recommendation", "99", "--target", "k8s", "--out", "x")
    assert missing.returncode != 0 and "no stored recommendation #99" in missing.stderr
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    linked = run(home, "export", "--recommendation", "1", "--target", "k8s", "--out", str(link))
    assert linked.returncode == 2 and "symbolic link" in linked.stderr
    assert list(real.iterdir()) == []
    a_file = tmp_path / "file"
    a_file.write_text("")
    onto = run(home, "export", "--recommendation", "1", "--target", "k8s", "--out", str(a_file))
    assert onto.returncode == 2 and "is a file" in onto.stderr
    for result in (bad, missing, linked, onto):
        assert "Traceback" not in result.stderr
