"""The bundled data files: every one loads through its schema, conversions are right, specs load."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from fleetfacts.schema import ENGINE_OPS, PRICES, PROFILE, PROFILE_GROUP, ROUTES, load_table

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "profiles" / "published"
DATA = ROOT / "planner" / "data"
PUBLISHED_FILES = sorted(PUBLISHED.glob("*.csv"))
SHAPE = ("pp", "mode", "input_len", "output_len", "batch_size", "concurrency", "request_rate")
PER_GPU_NOTE = re.compile(r"published per GPU: ([0-9.]+) tok/s/GPU x (\d+) GPUs")


def _perf() -> pd.DataFrame:
    return load_table(PUBLISHED / "trtllm_perf_overview.csv", PROFILE)


def test_published_files_present():
    names = {p.name for p in PUBLISHED_FILES}
    assert {"trtllm_perf_overview.csv", "trtllm_online_serving_v014.csv", "nvidia_nim_serving.csv",
            "head_to_head.csv"} <= names


@pytest.mark.parametrize("path", PUBLISHED_FILES, ids=lambda p: p.name)
def test_published_profiles_load_and_are_published(path):
    frame = load_table(path, PROFILE)
    assert len(frame) > 0
    assert (frame["provenance"] == "published").all()
    assert frame["source"].str.len().gt(10).all()
    assert frame["output_tok_per_s"].notna().all()
    for version in frame["engine_version"].unique():
        Version(version)  # a clean PEP 440 version, usable with ENGINE_OPS specifiers


@pytest.mark.parametrize("path", PUBLISHED_FILES, ids=lambda p: p.name)
def test_no_duplicate_group_shape_rows(path):
    frame = load_table(path, PROFILE)
    key = frame[list(PROFILE_GROUP + SHAPE)].astype(str)
    assert not key.duplicated().any(), key[key.duplicated(keep=False)].head().to_string()


def test_perf_rows_have_a_numeric_tp_and_whole_replica_gpus():
    frame = _perf()
    assert frame["tp"].notna().all() and frame["pp"].notna().all()
    notes_gpus = frame["notes"].str.extract(r"\((\d+) GPUs per replica\)")[0].astype(int)
    assert (notes_gpus == frame["tp"] * frame["pp"]).all()


def test_per_gpu_rows_are_multiplied_by_the_replica_gpus():
    frame = _perf()
    per_gpu = frame[frame["notes"].str.contains("published per GPU:")]
    assert len(per_gpu) > 100
    match = per_gpu["notes"].str.extract(PER_GPU_NOTE)
    figure, gpus = match[0].astype(float), match[1].astype(int)
    assert (gpus == per_gpu["tp"] * per_gpu["pp"]).all()
    assert ((figure * gpus - per_gpu["output_tok_per_s"]).abs() < 1e-6).all()
    assert set(per_gpu["engine_version"]) == {"1.2.0", "1.0+main.585c756"}


def _row(frame, **match) -> pd.Series:
    mask = pd.Series(True, index=frame.index)
    for column, value in match.items():
        mask &= frame[column] == value
    assert mask.sum() == 1, match
    return frame[mask].iloc[0]


def test_known_per_gpu_row_against_the_doc():
    # main@585c756 perf-overview, LLaMA v3.3 70B table: H200 TP2 (FP8), 1024/1024 -> 2,582 tok/s/GPU.
    published_per_gpu, gpus = 2582, 2
    row = _row(_perf(), engine_version="1.0+main.585c756", gpu="h200", model="llama-3.3-70b", tp=2,
               input_len=1024, output_len=1024)
    assert row.output_tok_per_s == pytest.approx(published_per_gpu * gpus)
    assert row.output_tok_per_s / row.tp == pytest.approx(published_per_gpu)
    assert row.batch_size == 3000  # the doc's num_requests for 1024/1024


def test_total_docs_are_kept_as_published_totals():
    frame = _perf()
    totals = frame[frame["notes"].str.contains("published as total for the TP group")]
    assert set(totals["engine_version"]) >= {"0.17", "0.21", "1.0", "0.20+main"}
    assert not totals["notes"].str.contains("published per GPU").any()
    # A total-throughput row divided by its GPUs is the per-GPU figure; for a TP8 row that is an eighth.
    tp8 = totals[(totals["tp"] == 8) & (totals["pp"] == 1)].iloc[0]
    per_gpu = tp8.output_tok_per_s / (tp8.tp * tp8.pp)
    assert per_gpu * 8 == pytest.approx(tp8.output_tok_per_s)


def test_total_tokens_derived_from_fixed_lengths():
    frame = _perf()
    expected = frame["output_tok_per_s"] * (frame["input_len"] + frame["output_len"]) / frame["output_len"]
    assert ((frame["total_tok_per_s"] - expected).abs() <= 1e-6 * expected).all()


def test_num_requests_only_where_the_doc_states_them():
    frame = _perf()
    assert frame.loc[frame["engine_version"] == "0.17", "batch_size"].isna().all()
    stated = frame.dropna(subset=["batch_size"])
    assert (stated["batch_size"] == stated["num_requests"]).all()
    assert set(stated.loc[(stated.input_len == 128) & (stated.output_len == 128), "batch_size"]) == {30000}


def test_online_v014_modes_and_latencies():
    frame = load_table(PUBLISHED / "trtllm_online_serving_v014.csv", PROFILE)
    assert set(frame["mode"]) == {"rate", "offline"}
    rate = frame[frame["mode"] == "rate"]
    assert rate["request_rate"].notna().all() and rate["tpot_mean_ms"].isna().all()
    assert frame["itl_mean_ms"].notna().all() and frame["ttft_mean_ms"].notna().all()
    assert (frame.loc[frame["mode"] == "offline", "batch_size"] == 500).all()
    assert set(frame["engine_version"]) == {"0.14.0"} and set(frame["precision"]) == {"bf16"}


def test_nim_is_a_concurrency_sweep_of_one_two_gpu_replica():
    frame = load_table(PUBLISHED / "nvidia_nim_serving.csv", PROFILE)
    assert set(frame["engine"]) == {"nim"} and set(frame["tp"]) == {2}
    assert (frame["mode"] == "concurrency").all() and frame["concurrency"].is_monotonic_increasing


def test_head_to_head_rows_are_same_host_rate_points():
    frame = load_table(PUBLISHED / "head_to_head.csv", PROFILE)
    assert set(frame["engine"]) == {"vllm", "sglang", "trtllm"}
    assert (frame["mode"] == "rate").all() and (frame["request_rate"] == 10).all()
    assert frame["notes"].str.contains("not saturated").all()


def test_prices_load_and_derived_prices_are_instance_over_gpus():
    frame = load_table(DATA / "prices.csv", PRICES)
    assert {"h100", "h200", "a100", "l40s", "b200", "gh200"} <= set(frame["gpu"])
    derived = frame[frame["notes"].str.contains("derived: instance price / GPUs per instance")]
    assert len(derived) > 10
    parts = derived["notes"].str.extract(r"= ([0-9.]+) / (\d+)")
    expected = parts[0].astype(float) / parts[1].astype(int)
    assert ((derived["usd_per_gpu_hour"] - expected).abs() < 1e-3).all()


def test_engine_ops_versions_cover_every_bundled_trtllm_version():
    ops = load_table(DATA / "engine_ops.csv", ENGINE_OPS)
    trt = ops[ops["engine"] == "trtllm"]
    versions = set()
    for path in PUBLISHED_FILES:
        frame = load_table(path, PROFILE)
        versions |= set(frame.loc[frame["engine"] == "trtllm", "engine_version"])
    for version in versions:
        matches = [v for v in trt["versions"] if SpecifierSet(v).contains(version, prereleases=True)]
        assert len(matches) == 1, (version, matches)
    assert ops["source"].str.len().gt(20).all()
    assumed = ops[ops["engineer_hours_per_update"] > 0]
    assert assumed["source"].str.contains("assumption:").all()


def test_routes_and_trace_example():
    routes = load_table(ROOT / "examples" / "routes.csv", ROUTES)
    assert {"online", "batch"} == set(routes["traffic"])
    assert (routes["notes"].str.len() > 20).all()
    code = routes[routes["name"] == "code-completion"].iloc[0]
    trace = pd.read_csv(ROOT / "examples" / "traces" / "azure_llm_2023_code.csv")
    assert code.input_len_mean == pytest.approx(trace["ContextTokens"].mean(), abs=0.01)
    assert code.output_len_p50 == pytest.approx(trace["GeneratedTokens"].median(), abs=0.01)
    seconds = (pd.to_datetime(trace["TIMESTAMP"]) - pd.to_datetime(trace["TIMESTAMP"]).min()).dt.total_seconds()
    assert code.rate_rps == pytest.approx((len(trace) - 1) / seconds.max(), rel=1e-3)
    attribution = (ROOT / "examples" / "traces" / "ATTRIBUTION.md").read_text(encoding="utf-8")
    assert "CC-BY" in attribution and "Splitwise" in attribution and "ISCA 2024" in attribution
