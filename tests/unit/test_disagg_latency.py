"""Disaggregated prefill and decode (issue 33, first step): the prompt's KV cache in bytes and in
flows between two TP layouts, the links catalog, transfer times, and the two roles against the
LatencyModel they wrap. Model shapes are the published config.json values (the URLs in
data/catalog/models.csv); link figures are data/catalog/links.csv's."""

from __future__ import annotations

import csv
import dataclasses
import io
from pathlib import Path

import numpy as np
import pytest

from planner.errors import UsageError
from planner.latency.catalog import CatalogError, UnsupportedError, load_catalog
from planner.latency.disagg import (
    LINK_COLUMNS,
    DecodeRole,
    PrefillRole,
    deployment_kv_transfer,
    disaggregated_request,
    kv_transfer_bytes,
    kv_transfer_seconds,
    links_path,
    load_link_table,
    load_links,
    transfer_seconds,
)
from planner.latency.model import Deployment, LatencyModel
from tests.unit.test_latency_model import IDEAL

# meta-llama/Llama-3.1-70B config.json: 80 layers, 8 KV heads, head_dim 8192 / 64 = 128
L70_LAYERS, L70_KV_HEADS, HEAD_DIM = 80, 8, 128
# meta-llama/Llama-3.1-8B config.json: 32 layers, 8 KV heads, head_dim 4096 / 32 = 128
L8_LAYERS = 32
BF16 = 2


def deployment(model: str, gpu: str = "H100-SXM", tp: int = 1, **kw: object) -> Deployment:
    c = load_catalog()
    return Deployment(
        gpu=c.gpus.get(gpu),
        model=c.models.get(model),
        precision=c.precisions.get("bf16"),
        tp=tp,
        **kw,  # type: ignore[arg-type]
    )


# --- KV bytes ------------------------------------------------------------------------------


def test_kv_bytes_per_token_match_the_published_configs() -> None:
    c = load_catalog()
    by_hand_70b = L70_LAYERS * L70_KV_HEADS * HEAD_DIM * 2 * BF16
    assert by_hand_70b == 327_680 == 320 * 1024
    by_hand_8b = L8_LAYERS * L70_KV_HEADS * HEAD_DIM * 2 * BF16
    assert by_hand_8b == 131_072
    t70 = kv_transfer_bytes(c.models.get("llama-3.1-70b"), 4000, "bf16", 8, 8)
    assert t70.bytes_per_token == by_hand_70b
    assert t70.cache_bytes == t70.bytes == by_hand_70b * 4000
    t8 = kv_transfer_bytes(c.models.get("llama-3.1-8b"), 1000, 2.0)
    assert t8.bytes == by_hand_8b * 1000
    # FP8 halves it; and the bytes agree with what each TP-8 GPU of a Deployment holds
    assert kv_transfer_bytes(c.models.get("llama-3.1-70b"), 10, "fp8").bytes == 10 * by_hand_70b / 2
    assert deployment("llama-3.1-70b", tp=8).kv_bytes_per_token * 8 == by_hand_70b


def test_resharding_tp8_to_tp4_is_eight_flows_two_into_each_decode_gpu() -> None:
    model = load_catalog().models.get("llama-3.1-70b")
    tokens = 4000
    t = kv_transfer_bytes(model, tokens, "bf16", prefill_tp=8, decode_tp=4)
    per_head = L70_LAYERS * HEAD_DIM * 2 * BF16 * tokens  # one KV head of the whole prompt
    assert t.flow_count == 8
    assert {f.bytes for f in t.flows} == {per_head}
    assert t.bytes_per_flow == per_head
    assert (t.senders, t.receivers) == (8, 4)
    assert t.max_sent_bytes == per_head
    assert t.max_received_bytes == 2 * per_head
    assert sorted({f.target for f in t.flows if f.source in (0, 1)}) == [0]  # heads 0 and 1
    # the other way round: each prefill GPU sends its two heads to two decode GPUs
    back = kv_transfer_bytes(model, tokens, "bf16", prefill_tp=4, decode_tp=8)
    assert back.flow_count == 8 and (back.senders, back.receivers) == (4, 8)
    assert back.max_sent_bytes == 2 * per_head and back.max_received_bytes == per_head
    # same layout: one flow per GPU pair, rank to rank
    same = kv_transfer_bytes(model, tokens, "bf16", 8, 8)
    assert [(f.source, f.target) for f in same.flows] == [(i, i) for i in range(8)]


def test_replicated_kv_heads_cross_once_per_decode_replica() -> None:
    # two KV heads over TP 8: each head lives on four GPUs on both sides
    base = load_catalog().models.get("llama-3.1-8b")
    model = dataclasses.replace(base, kv_heads=2)
    t = kv_transfer_bytes(model, 100, "bf16", prefill_tp=8, decode_tp=8)
    assert t.cache_bytes == 2 * L8_LAYERS * 2 * HEAD_DIM * BF16 * 100
    assert t.bytes == 4 * t.cache_bytes  # each decode GPU receives the head it holds
    assert t.senders == 8  # replicas share the sending
    # TP 1 -> TP 8: the one prefill GPU sends each head four times
    one = kv_transfer_bytes(model, 100, "bf16", prefill_tp=1, decode_tp=8)
    assert one.senders == 1 and one.max_sent_bytes == one.bytes == 4 * one.cache_bytes


def test_kv_transfer_refuses_bad_inputs() -> None:
    c = load_catalog()
    model = c.models.get("llama-3.1-70b")
    with pytest.raises(UsageError, match="KV precision 'int3'"):
        kv_transfer_bytes(model, 10, "int3")
    with pytest.raises(UsageError, match="expected 1 \\(fp8\\)"):
        kv_transfer_bytes(model, 10, 3.0)
    with pytest.raises(UnsupportedError, match="decode tensor parallelism 3"):
        kv_transfer_bytes(model, 10, "bf16", 8, 3)
    with pytest.raises(UsageError, match="prompt tokens -1"):
        kv_transfer_bytes(model, -1, "bf16")
    fp8 = deployment("llama-3.1-70b", tp=8, kv_bytes=1.0)
    with pytest.raises(UnsupportedError, match="converting it on the way"):
        deployment_kv_transfer(fp8, deployment("llama-3.1-70b", tp=8), 10)
    with pytest.raises(UsageError, match="one model"):
        deployment_kv_transfer(deployment("llama-3.1-8b"), deployment("llama-3.1-70b", tp=8), 10)


# --- links ---------------------------------------------------------------------------------


def test_links_catalog_loads_with_a_source_and_date_on_every_row() -> None:
    table = load_link_table()
    assert len(table.entries) >= 12
    for link in table.entries:
        assert link.source.strip() and link.source_date.strip(), link.name
        assert 0 < link.efficiency <= 1 and link.latency_s >= 0
    p5 = table.get("p5.48xlarge")
    assert p5.name == "aws-p5-efa" and p5.line_gbit_s == 3200 and p5.gpu_aligned
    assert table.get("Standard_ND96isr_H100_v5").line_gbit_s == 3200
    assert table.get("a3-megagpu-8g").line_gbit_s == 1800
    assert not table.get("ethernet-100g").gpu_aligned
    gpus = load_catalog().gpus
    for link in table.entries:  # a named GPU is a catalog GPU (raises when it is not)
        if link.gpu:
            gpus.get(link.gpu)
    with pytest.raises(UsageError, match="unknown link"):
        table.get("carrier-pigeon")


def test_nvlink_rows_agree_with_gpus_csv() -> None:
    """An NVLink row's line rate is gpus.csv's per-GPU link (GB/s per direction) x 8 bits x
    the node's GPUs: a change to either file that breaks this fails here."""
    c = load_catalog()
    nvlinks = [link for link in load_link_table().entries if link.scope == "node"]
    assert len(nvlinks) >= 3
    for link in nvlinks:
        gpu = c.gpus.get(link.gpu)
        assert link.gpus == gpu.max_gpus_per_node
        assert link.line_gbit_s == gpu.link_gbps * 8 * gpu.max_gpus_per_node, link.name


def _write(tmp_path: Path, rows: list[dict[str, str]]) -> Path:
    text = links_path().read_text(encoding="utf-8")
    header = next(csv.reader(io.StringIO(text)))
    out = io.StringIO()
    writer = csv.DictWriter(out, header, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path = tmp_path / "links.csv"
    path.write_text(out.getvalue(), encoding="utf-8")
    return path


def _good_row() -> dict[str, str]:
    return next(csv.DictReader(io.StringIO(links_path().read_text(encoding="utf-8"))))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"source": " "}, "'aws-p5-efa': source is required"),
        ({"source_date": ""}, "'aws-p5-efa': source_date is required"),
        ({"line_gbit_s": "fast"}, "line_gbit_s = 'fast' is not a number"),
        ({"line_gbit_s": "0"}, "line_gbit_s = 0 must be positive"),
        ({"gpus": "2.5"}, "gpus = 2.5 must be whole"),
        ({"gpu_aligned": "yes"}, "gpu_aligned = 'yes': expected true or false"),
        ({"scope": "wan"}, "scope = 'wan': expected one of network, node"),
        ({"efficiency": "1.5"}, "efficiency = 1.5: expected more than 0"),
        ({"latency_us": "-3"}, "latency_us must be 0 or more"),
    ],
)
def test_bad_link_rows_name_the_row_and_column(
    tmp_path: Path, change: dict[str, str], message: str
) -> None:
    path = _write(tmp_path, [{**_good_row(), **change}])
    with pytest.raises(CatalogError) as err:
        load_links(path)
    assert message in str(err.value) and str(path) in str(err.value)


def test_a_links_file_without_a_column_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "links.csv"
    path.write_text("name,aliases,scope\nx,,network\n", encoding="utf-8")
    with pytest.raises(CatalogError, match="missing column 'line_gbit_s'"):
        load_links(path)
    assert "latency_us" in LINK_COLUMNS


def test_blank_efficiency_defaults_to_the_stated_assumption(tmp_path: Path) -> None:
    path = _write(tmp_path, [{**_good_row(), "efficiency": ""}])
    assert load_links(path)[0].efficiency == 0.8


# --- transfer time -------------------------------------------------------------------------


def test_a_4000_token_70b_prompt_over_p5_efa_and_100_gbe() -> None:
    """1.31 GB of KV cache (4,000 x 320 KiB), TP 8 -> TP 8. Over P5's EFA each GPU sends its
    163.84 MB over its own 400 Gb/s x 0.8 = 40 GB/s: 4.10 ms + 15 us. Over a shared 100 GbE
    NIC all 1.31 GB go through 100 Gb/s x 0.8 = 10 GB/s: 131 ms + 75 us, 32x as long."""
    table = load_link_table()
    model = load_catalog().models.get("llama-3.1-70b")
    t = kv_transfer_bytes(model, 4000, "bf16", 8, 8)
    assert t.bytes == 1_310_720_000
    efa, eth = table.get("aws-p5-efa"), table.get("ethernet-100g")
    efa_s = kv_transfer_seconds(t, efa)
    eth_s = kv_transfer_seconds(t, eth)
    assert efa_s == pytest.approx(15e-6 + 163_840_000 / (3200e9 / 8 * 0.8 / 8))
    assert efa_s == pytest.approx(0.004111)
    assert eth_s == pytest.approx(75e-6 + 1_310_720_000 / (100e9 / 8 * 0.8))
    assert eth_s == pytest.approx(0.131147)
    # the plain form agrees for balanced flows; TP 8 -> TP 4 doubles the busiest receiver
    assert transfer_seconds(t.bytes, efa, flows=8) == pytest.approx(efa_s)
    to_tp4 = kv_transfer_bytes(model, 4000, "bf16", 8, 4)
    assert kv_transfer_seconds(to_tp4, efa) == pytest.approx(15e-6 + 2 * (efa_s - 15e-6))
    assert kv_transfer_seconds(to_tp4, eth) == pytest.approx(eth_s)  # a shared NIC: no change


def test_transfer_seconds_share_a_nic_and_add_aligned_ones() -> None:
    table = load_link_table()
    efa, eth = table.get("aws-p5-efa"), table.get("ethernet-100g")
    gb = 1e9
    assert transfer_seconds(0, efa) == 0.0
    one = transfer_seconds(gb, efa, 1)
    four = transfer_seconds(gb, efa, 4)
    assert (one - efa.latency_s) == pytest.approx(4 * (four - efa.latency_s))
    # more flows than GPUs cannot pass the instance's line rate
    assert transfer_seconds(gb, efa, 64) == pytest.approx(transfer_seconds(gb, efa, 8))
    assert transfer_seconds(gb, eth, 1) == transfer_seconds(gb, eth, 8)
    with pytest.raises(UsageError, match="flows 0"):
        transfer_seconds(gb, efa, 0)


# --- the roles -----------------------------------------------------------------------------


def test_roles_agree_with_the_latency_model_of_their_deployment() -> None:
    lm = LatencyModel(deployment("llama-3.1-8b"), IDEAL)
    prefill, decode = PrefillRole(lm), DecodeRole(lm)
    for prompt in (1, 500, 4000, 8192):
        assert prefill.seconds(prompt) == float(lm.prefill_time(prompt))
    assert prefill.seconds(1000, prompts=4) == float(lm.prefill_time(1000, 4))
    for batch, context in ((1, 100), (32, 32 * 2000), (256, 256 * 500)):
        assert decode.step_seconds(batch, context) == float(lm.decode_time(batch, context))


def test_a_prompt_past_the_token_budget_is_chunked() -> None:
    lm = LatencyModel(deployment("llama-3.1-8b", max_batched_tokens=2048), IDEAL)
    chunked = PrefillRole(lm).seconds(5000)
    by_hand = sum(
        float(lm.mixed_time(chunk, start, 0, 0, finishes))
        for chunk, start, finishes in ((2048, 0, 0), (2048, 2048, 0), (904, 4096, 1))
    )
    assert chunked == pytest.approx(by_hand)
    assert chunked > float(lm.prefill_time(5000))  # chunks re-read the cached prefix
    with pytest.raises(UsageError, match="one at a time"):
        PrefillRole(lm).seconds(2000, prompts=2)


def test_disaggregated_request_adds_up() -> None:
    c = load_catalog()
    # Splitwise's point: the roles may use different GPUs and TP degrees
    pre_lm = LatencyModel(deployment("llama-3.1-70b", tp=8), IDEAL)
    dec_lm = LatencyModel(deployment("llama-3.1-70b", gpu="H200", tp=4), IDEAL)
    efa = load_link_table().get("aws-p5-efa")
    r = disaggregated_request(
        PrefillRole(pre_lm), DecodeRole(dec_lm), efa, 4000, 500, decode_batch=16
    )
    assert r.prefill_s == float(pre_lm.prefill_time(4000))
    t = kv_transfer_bytes(c.models.get("llama-3.1-70b"), 4000, "bf16", 8, 4)
    assert r.transfer_s == kv_transfer_seconds(t, efa)
    assert r.first_step_s == float(dec_lm.decode_time(16, 16 * 4000))
    assert r.ttft_s == pytest.approx(r.prefill_s + r.transfer_s + r.first_step_s)
    steps = dec_lm.decode_time(16, 16 * (4000 + np.arange(1, 500)))
    assert r.tpot_s == pytest.approx(float(np.mean(steps)))
    assert r.e2e_s == pytest.approx(r.ttft_s + 499 * r.tpot_s)
    assert r.transfer_share == pytest.approx(r.transfer_s / r.ttft_s)
    assert 0 < r.transfer_share < 1
    # the prefill side yields the first token: no decode step in TTFT
    p = disaggregated_request(
        PrefillRole(pre_lm), DecodeRole(dec_lm), efa, 4000, 500, 16, first_token="prefill"
    )
    assert p.first_step_s == 0 and p.ttft_s == pytest.approx(r.prefill_s + r.transfer_s)
    # a slow link shows in the share
    slow = disaggregated_request(
        PrefillRole(pre_lm), DecodeRole(dec_lm), load_link_table().get("ethernet-25g"), 4000, 500
    )
    assert slow.transfer_share > r.transfer_share


def test_decode_batch_limits_are_the_decode_deployments() -> None:
    pre = PrefillRole(LatencyModel(deployment("llama-3.1-8b"), IDEAL))
    small = DecodeRole(LatencyModel(deployment("llama-3.1-8b", max_seqs=8), IDEAL))
    link = load_link_table().get("nvlink-h100")
    with pytest.raises(UnsupportedError, match="1 to 8 sequences"):
        disaggregated_request(pre, small, link, 100, 10, decode_batch=9)
    full = small.deployment.kv_capacity_tokens
    with pytest.raises(UnsupportedError, match="tokens of KV cache"):
        disaggregated_request(pre, small, link, full, 10, decode_batch=1)
    with pytest.raises(UsageError, match="first_token 'both'"):
        disaggregated_request(pre, small, link, 100, 10, first_token="both")
