"""planner.engine.transfer / transfer_check: the physics, the calibration, transferred curves and their validation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from fleetfacts.specs import bundled_gpu_specs, bundled_model_specs
from planner.engine import transfer as T
from planner.engine import transfer_check as C
from planner.engine import transfer_physics as P
from planner.engine.curves import Caps, NoCurveError, Observation, Range, load_profiles, offline_features

GPUS, MODELS = bundled_gpu_specs(), bundled_model_specs()


def target(model="llama-3.1-8b", gpu="h200", precision="bf16", tp=1, engine="vllm") -> P.Target:
    return P.Target(engine, MODELS[model], GPUS[gpu], precision, tp)


@pytest.fixture(scope="module")
def bundled():
    profiles = load_profiles()
    return profiles, T.group_data(profiles)


# ---------------------------------------------------------------- physics

def test_physics_scales_with_the_datasheet_and_the_architecture():
    base = P.physics_matrix(target())
    faster = P.physics_matrix(target(gpu="h100"))
    w, kv, flops = P.COEF_INDEX["weights"], P.COEF_INDEX["kv"], P.COEF_INDEX["decode_flops"]
    # weights and KV reads scale with 1/bandwidth (H100 3.35 vs H200 4.8 TB/s), FLOPs with 1/peak (same)
    assert faster[0, w] / base[0, w] == pytest.approx(4.8 / 3.35)
    assert faster[2, kv] / base[2, kv] == pytest.approx(4.8 / 3.35)
    assert faster[1, flops] == pytest.approx(base[1, flops])
    tp2 = P.physics_matrix(target(tp=2))
    assert tp2[0, w] == pytest.approx(base[0, w] / 2) and tp2[1, flops] == pytest.approx(base[1, flops] / 2)
    assert base[1, P.COEF_INDEX["tp_bytes"]] == 0 and tp2[1, P.COEF_INDEX["tp_bytes"]] > 0 and tp2[0, P.COEF_INDEX["tp_latency"]] > 0
    moe = P.physics_matrix(target(model="mixtral-8x7b"))
    assert moe[1, P.COEF_INDEX["expert_tokens"]] == 32 * 2 and base[1, P.COEF_INDEX["expert_tokens"]] == 0


def test_a_quantised_checkpoint_keeps_its_lm_head_in_16_bits():
    llama = MODELS["llama-3.1-8b"]
    head = llama.vocab_size * llama.hidden_size
    body = llama.params - 2 * head  # untied: the embedding table and the LM head
    bf16, fp8 = target(), target(precision="fp8")
    assert P.read_weight_bytes(bf16) == pytest.approx(2 * (body + head))
    assert P.read_weight_bytes(fp8) == pytest.approx(body + 2 * head)
    assert P.resident_weight_bytes(fp8) == pytest.approx(body + 2 * 2 * head)
    w, flops, prefill = P.COEF_INDEX["weights"], P.COEF_INDEX["decode_flops"], P.COEF_INDEX["prefill_flops"]
    p16, p8 = P.physics_matrix(bf16), P.physics_matrix(fp8)
    assert p16[1, flops] / 2 < p8[1, flops] < p16[1, flops]        # the LM head still runs at the bf16 rate
    assert p8[3, prefill] == pytest.approx(p16[3, prefill] / 2)     # prefill: no LM head per token...
    assert p8[5, prefill] == pytest.approx(p16[5, prefill]) and p8[5, prefill] > 0  # one row per prompt, 16 bits
    assert p8[0, w] < p16[0, w]


def test_a_native_mxfp4_checkpoint_stores_its_experts_in_4_bits():
    """gpt-oss: experts in MXFP4 whatever the precision label, the rest in 16 bits; BF16 activations on
    Hopper, 8-bit ones on Blackwell (TensorRT-LLM's gpt-oss deployment guide)."""
    oss = MODELS["gpt-oss-120b"]
    assert oss.native_quant == "mxfp4"
    assert P.resident_weight_bytes(target("gpt-oss-20b", "h100", "fp8")) < 16e9  # "runs within 16 GB" (model card)
    big = P.resident_weight_bytes(target("gpt-oss-120b", "h100", "fp8"))
    assert 55e9 < big < 80 * 2**30                                     # "fits on a single 80 GB GPU"
    assert big == pytest.approx(P.resident_weight_bytes(target("gpt-oss-120b", "b200", "fp4")))
    assert P.gemm_path(target("gpt-oss-120b", "h200", "fp8")) == "mxfp4-bf16"
    assert P.gemm_path(target("gpt-oss-120b", "b200", "fp4")) == "mxfp4-fp8"
    assert P.gemm_path(target("qwen3-30b-a3b", "b200", "fp4")) == "fp4"
    assert P.gemm_path(target("llama-3.1-8b", "a100", "bf16")) == "16bit"


@pytest.mark.parametrize("model", ["llama-3.2-1b", "qwen2.5-32b", "llama-3.1-70b", "mixtral-8x7b", "gpt-oss-20b",
                                   "qwen3-30b-a3b"])
@pytest.mark.parametrize("precision", ["bf16", "fp8", "fp4"])
def test_a_faster_gpu_never_gives_a_slower_step(model, precision):
    """More bandwidth, more FLOPs or a faster link never make any term of any step slower."""
    coef = np.linspace(0.5, 2.0, P.N_COEF)
    base = target(model, "h200", precision, 2, "trtllm")
    theta = P.physics_matrix(base) @ coef
    g = base.gpu
    for faster in (dataclasses.replace(g, mem_bandwidth_tb_s=g.mem_bandwidth_tb_s * 1.5),
                   dataclasses.replace(g, bf16_dense_tflops=g.bf16_dense_tflops * 2, fp8_dense_tflops=g.fp8_dense_tflops * 2),
                   dataclasses.replace(g, nvlink_gb_s=g.nvlink_gb_s * 2)):
        quicker = P.physics_matrix(dataclasses.replace(base, gpu=faster)) @ coef
        assert (quicker <= theta * (1 + 1e-12)).all()
    assert (P.physics_matrix(base) >= 0).all()


def test_trtllm_bench_caps_follow_the_tool():
    """trtllm-bench: batch from the requests the KV cache holds at ISL+OSL (rounded up, 64..4096), token
    budget batch x (1 + ISL/OSL) rounded (2048..32768); more memory never gives a smaller batch."""
    small = P.trtllm_bench_caps(target("llama-3.1-70b", "h100", "fp8", 1, "trtllm"), 2048, 2048)
    big = P.trtllm_bench_caps(target("llama-3.1-70b", "h200", "fp8", 1, "trtllm"), 2048, 2048)
    assert 64 <= small.max_num_seqs <= big.max_num_seqs <= 4096
    assert small.max_num_seqs % 32 == 0 and big.max_num_seqs % 32 == 0
    short = P.trtllm_bench_caps(target("llama-3.1-8b", "b200", "fp4", 1, "trtllm"), 128, 128)
    assert short.max_num_seqs == 4096 and short.max_batched_tokens == 8192  # 4096 x (1 + 1)
    long_in = P.trtllm_bench_caps(target("llama-3.1-8b", "b200", "fp4", 1, "trtllm"), 2048, 128)
    assert 8192 < long_in.max_batched_tokens < 32768 and long_in.max_batched_tokens % 1024 == 0
    assert P.trtllm_bench_caps(target("llama-3.2-1b", "b200", "fp4", 1, "trtllm"), 4096, 128).max_batched_tokens == 32768
    assert P._bench_round_batch(10) == 64 and P._bench_round_batch(300) == 384 and P._bench_round_batch(1025) == 1280
    assert P._bench_round_tokens(100) == 2048 and P._bench_round_tokens(5000) == 5120


def test_published_rows_without_a_request_count_are_saturated_maxima(bundled):
    """The v0.17 tables (A100, L40S, GH200, Mixtral) state no request count: they count as full waves."""
    _, data = bundled
    older = [d for d in data if d.key.engine == "trtllm" and d.key.engine_version == "0.17"]
    assert {"a100", "l40s", "gh200"} <= {d.key.gpu for d in older} and all(d.obs for d in older)


def test_tp_without_an_interconnect_figure_is_refused():
    no_link = dataclasses.replace(GPUS["l40s"], nvlink_gb_s=None, pcie_gb_s=None)
    with pytest.raises(NoCurveError, match="no interconnect bandwidth"):
        P.physics_matrix(P.Target("vllm", MODELS["llama-3.1-8b"], no_link, "bf16", 2))
    assert P.physics_matrix(P.Target("vllm", MODELS["llama-3.1-8b"], no_link, "bf16", 1)).shape == (T.N_PARAMS, P.N_COEF)


# ---------------------------------------------------------------- calibration: parameter recovery

def synthetic_groups(coef: np.ndarray, rng: np.random.Generator, noise: float) -> list[T.GroupData]:
    """Offline observations of several models, GPUs and TP sizes, timed by theta = P @ coef (+ noise)."""
    caps = Caps(512, 2_000_000, 8192)
    groups = []
    for model, gpu, tp in [("llama-3.1-8b", "h200", 1), ("qwen2.5-7b", "h100", 1), ("llama-3.1-70b", "h200", 4),
                           ("qwen2.5-32b", "h100", 2), ("mixtral-8x7b", "h200", 2), ("llama-3.2-3b", "a100", 1)]:
        t = target(model, gpu, "bf16", tp, "trtllm")
        theta = P.physics_matrix(t) @ coef
        obs = []
        for i, (n, inp, out) in enumerate([(1, 128, 128), (8, 512, 256), (64, 1000, 1000), (256, 2048, 128),
                                           (1024, 128, 2048), (16, 5000, 500), (4096, 500, 2000)]):
            phi = offline_features(caps, n, inp, out)
            seconds = float(phi @ theta) * float(np.exp(rng.normal(0, noise)))
            obs.append(Observation(phi, seconds, 1.0, "throughput", i))
        design = np.array([(o.phi @ P.physics_matrix(t)) / o.seconds for o in obs])
        key = T.GroupKey("trtllm", "1.0", gpu, model, "bf16", tp)
        groups.append(T.GroupData(key, t, caps, tuple(obs), design, Range((128, 5000), (128, 2048), (1, 4096)), None))
    return groups


def test_calibration_recovers_known_coefficients(monkeypatch):
    monkeypatch.setattr(T, "PRIOR_WEIGHT", 1e-9)  # the priors only decide what the data cannot
    truth = np.zeros(P.N_COEF)
    for name, value in {"weights": 1.3, "step": 2e-5, "tp_latency": 1e-5, "decode_flops": 2.2, "seq": 3e-7,
                        "tp_bytes": 1.1, "kv": 1.4, "prefill_flops": 1.8, "attn_flops": 2.5,
                        "request": 2e-4, "expert_tokens": 2e-7}.items():
        truth[P.COEF_INDEX[name]] = value
    groups = synthetic_groups(truth, np.random.default_rng(0), 0.01)
    cal = T.calibrate(groups, "trtllm")
    predicted = [float(o.phi @ cal.theta(g.target)) / o.seconds for g in groups for o in g.obs]
    np.testing.assert_allclose(predicted, 1.0, rtol=0.04)  # 1% noise
    for name in ("weights", "decode_flops", "prefill_flops"):  # the well-identified physical ones
        assert cal.coef[P.COEF_INDEX[name]] == pytest.approx(truth[P.COEF_INDEX[name]], rel=0.1), name


def level_groups(coef: np.ndarray, factors: dict[str, float], rng: np.random.Generator) -> list[T.GroupData]:
    """Offline observations on GPUs of three generations whose decode and prefill FLOP efficiencies
    differ by `factors` (per arch), timed by the physics with 1% noise."""
    caps = Caps(512, 2_000_000, 8192)
    groups = []
    for model, gpu in [("llama-3.1-8b", "h200"), ("qwen2.5-7b", "h100"), ("qwen2.5-32b", "b200"),
                       ("llama-3.2-3b", "b200"), ("llama-3.1-8b", "a100"), ("qwen2.5-14b", "a100")]:
        t = target(model, gpu, "bf16", 1, "trtllm")
        c = coef.copy()
        for name in ("decode_flops", "prefill_flops"):
            c[P.COEF_INDEX[name]] *= factors[t.gpu.arch]
        theta = P.physics_matrix(t) @ c
        obs = []
        for i, (n, inp, out) in enumerate([(1, 128, 128), (8, 512, 256), (64, 1000, 1000), (256, 2048, 128),
                                           (1024, 128, 2048), (16, 5000, 500), (4096, 500, 2000)]):
            phi = offline_features(caps, n, inp, out)
            obs.append(Observation(phi, float(phi @ theta) * float(np.exp(rng.normal(0, 0.01))), 1.0, "throughput", i))
        design = np.array([(o.phi @ P.physics_matrix(t)) / o.seconds for o in obs])
        groups.append(T.GroupData(T.GroupKey("trtllm", "1.0", gpu, model, "bf16", 1), t, caps, tuple(obs), design,
                                  Range((128, 5000), (128, 2048), (1, 4096)), None))
    return groups


def test_calibration_recovers_per_generation_efficiencies(monkeypatch):
    """Known FLOP-efficiency factors per GPU generation come back as level effects (ratios between
    generations: the engine-wide value and the effects share one scale)."""
    monkeypatch.setattr(T, "PRIOR_WEIGHT", 1e-9)
    monkeypatch.setattr(T, "EFFECT_SD", {**T.EFFECT_SD, "arch": 10.0})  # no shrinkage: recovery, not pooling
    truth = np.zeros(P.N_COEF)
    for name, value in {"weights": 1.3, "step": 2e-5, "decode_flops": 2.0, "seq": 3e-7, "kv": 1.4,
                        "prefill_flops": 1.8, "attn_flops": 2.5, "request": 2e-4}.items():
        truth[P.COEF_INDEX[name]] = value
    factors = {"ampere": 0.8, "hopper": 1.0, "blackwell": 1.3}
    groups = level_groups(truth, factors, np.random.default_rng(1))
    cal = T.calibrate(groups, "trtllm")
    by_arch = {g.target.gpu.arch: cal.coef_for(g.target) for g in groups}
    for arch in ("ampere", "blackwell"):
        ratio = by_arch[arch][P.COEF_INDEX["prefill_flops"]] / by_arch["hopper"][P.COEF_INDEX["prefill_flops"]]
        assert ratio == pytest.approx(factors[arch], rel=0.05), arch
    predicted = [float(o.phi @ cal.theta(g.target)) / o.seconds for g in groups for o in g.obs]
    np.testing.assert_allclose(predicted, 1.0, rtol=0.05)


def test_shrinkage_pulls_a_thinly_seen_level_toward_the_engine(monkeypatch):
    """A generation seen in one table moves less than its data alone would say; more spread, more move."""
    truth = np.zeros(P.N_COEF)
    for name, value in {"weights": 1.3, "step": 2e-5, "decode_flops": 2.0, "kv": 1.4, "prefill_flops": 1.8,
                        "attn_flops": 2.5}.items():
        truth[P.COEF_INDEX[name]] = value
    groups = level_groups(truth, {"ampere": 1.0, "hopper": 1.0, "blackwell": 1.6}, np.random.default_rng(2))
    groups = [g for g in groups if g.key.model != "llama-3.2-3b"]  # one Blackwell table left
    moved = {}
    for sd in (0.05, 0.3, 3.0):
        monkeypatch.setattr(T, "EFFECT_SD", {**T.EFFECT_SD, "arch": sd})
        effect = T.calibrate(groups, "trtllm").effects.get(("arch", "blackwell"), np.zeros(P.N_COEF))
        moved[sd] = float(effect[P.COEF_INDEX["decode_flops"]] + effect[P.COEF_INDEX["prefill_flops"]])
    assert 0 < moved[0.05] < moved[0.3] < moved[3.0]


def test_calibration_with_tp1_data_only_borrows_the_tp_costs(bundled):
    _, data = bundled
    vllm = T.calibrate_engine(data, "vllm")
    trt = T.calibrate_engine(data, "trtllm")
    assert set(vllm.borrowed) == {"tp_latency from trtllm", "tp_bytes from trtllm"}
    assert vllm.coef[P.COEF_INDEX["tp_bytes"]] == trt.coef[P.COEF_INDEX["tp_bytes"]]
    assert 0.5 < 1 / vllm.coef[P.COEF_INDEX["weights"]] <= 1.2  # a physical share of datasheet bandwidth
    with pytest.raises(NoCurveError, match="no sglang profile"):
        T.calibrate(data, "sglang")


# ---------------------------------------------------------------- transferred curves

def test_transferred_curve_is_labelled_widened_and_capped_by_memory(bundled):
    profiles, data = bundled
    transfer = T.build_transfer(profiles, {"vllm": 0.2, "trtllm": 0.3}, data)
    curve = transfer.curve("vllm", MODELS["qwen2.5-32b"], GPUS["h100"], "bf16", 1)
    assert curve.source_provenance == "transferred" and curve.key.engine_version.endswith("+transfer")
    pred = curve.predict_concurrency(1000, 1000, 16)
    assert pred.provenance == "transferred" and "transferred from" in pred.note
    assert pred.high / pred.low > np.exp(2 * 1.645 * 0.2 / 1.645) * 0.99  # spans at least the 20% transfer error
    bigger = transfer.curve("vllm", MODELS["qwen2.5-32b"], GPUS["h200"], "bf16", 1)
    assert bigger.kv_cache_tokens > curve.kv_cache_tokens > 0
    assert transfer.curve("vllm", MODELS["qwen2.5-32b"], GPUS["h100"], "bf16", 2).kv_cache_tokens > curve.kv_cache_tokens
    with pytest.raises(NoCurveError, match="does not fit"):
        transfer.curve("vllm", MODELS["llama-3.1-405b"], GPUS["h100"], "bf16", 1)
    with pytest.raises(NoCurveError, match="no transfer calibration for engine 'sglang'"):
        transfer.curve("sglang", MODELS["qwen2.5-32b"], GPUS["h100"], "bf16", 1)


def test_transfer_reproduces_a_measured_kv_capacity(bundled):
    """vLLM's KV tokens on the H200 (memory left after weights and the calibrated reserve) match the profile."""
    profiles, data = bundled
    transfer = T.build_transfer(profiles, {}, data)
    measured = profiles[(profiles.engine == "vllm") & (profiles.model == "qwen2.5-7b")]["kv_cache_tokens"].iloc[0]
    curve = transfer.curve("vllm", MODELS["qwen2.5-7b"], GPUS["h200"], "bf16", 1)
    assert curve.kv_cache_tokens == pytest.approx(float(measured), rel=0.03)


def test_a_transferred_moe_option_on_vllms_default_fused_moe_config_says_so_and_is_slower(bundled):
    profiles, data = bundled
    transfer = T.build_transfer(profiles, {}, data)
    qwen3 = MODELS["qwen3-30b-a3b"]
    tuned = transfer.curve("vllm", qwen3, GPUS["h200"], "bf16", 1)
    assert "fused-MoE" not in tuned.note
    # The same model on a GPU for which vLLM ships no tuned config for E=128, N=768 (the H100 has none in bf16).
    untuned = transfer.curve("vllm", qwen3, GPUS["h100"], "bf16", 1)
    assert "no tuned fused-MoE config for E=128, N=768 on h100" in untuned.note
    # Each decoded sequence costs more there: the H200's untuned MoE profiles put a positive price on it.
    assert transfer.calibrations["vllm"].coef[P.COEF_INDEX["untuned_pairs"]] > 0
    assert P.physics_matrix(target("qwen3-30b-a3b", gpu="h100"))[1, P.COEF_INDEX["untuned_pairs"]] > 0


# ---------------------------------------------------------------- validation

def test_validate_transfer_runs_every_kind_of_experiment(bundled):
    profiles, data = bundled
    table = C.validate_transfer(profiles, data)
    kinds = set(zip(table.engine, table.kind, strict=True))
    assert {("vllm", "model"), ("vllm", "precision"), ("vllm", "precision model"), ("trtllm", "gpu"), ("trtllm", "tp"),
            ("trtllm", "model")} <= kinds
    vllm = table[table.engine == "vllm"].set_index("target")
    assert {"qwen2.5-7b bf16 on h200", "llama-3.1-8b bf16 on h200"} <= set(vllm.index)
    assert (table.median_err_pct <= table.max_err_pct).all() and (table.n > 0).all()
    assert {"vllm", "trtllm"} <= set(C.transfer_errors(table))  # and per architecture (test below)
    assert "summary" in "\n".join(C.format_validation(table, pd.DataFrame()))


def test_a_run_is_beyond_the_cuda_graphs_when_it_decodes_more_sequences_than_the_largest_graph():
    caps = Caps(1024, 10**7, 16384, cuda_graph_max_batch=512, preempts=True)
    at, above = (Observation(offline_features(caps, n, 128, 128), 1.0, 1.0, "throughput", 0) for n in (512, 768))
    assert not C.beyond_graphs(at) and C.beyond_graphs(above)


def test_validate_transfer_splits_each_worst_error_at_the_cuda_graphs(bundled):
    """Where small-expert MoE models miss (host-bound steps beyond the graphs) is in the report, per experiment."""
    _, data = bundled
    exp = next(e for e in C.experiments(data) if e.kind == "moe model" and e.target.startswith("olmoe-1b-7b"))
    row = C.run_experiment(data, exp)
    targets = [d for d in data if d.key.engine == "vllm" and exp.is_target(d)]
    beyond = [o for d in targets for o in d.obs if o.kind == "throughput" and C.beyond_graphs(o)]
    assert row["beyond_graphs_n"] == len(beyond) > 0 and row["n"] > len(beyond)
    assert max(row["inside_graphs_max_err_pct"], row["beyond_graphs_max_err_pct"]) == row["max_err_pct"]
    line = next(x for x in C.format_validation(pd.DataFrame([row], columns=C.EXPERIMENT_COLUMNS), pd.DataFrame())
                if "olmoe" in x)
    assert line.endswith(f"{row['inside_graphs_max_err_pct']:.1f} / {row['beyond_graphs_max_err_pct']:.1f} "
                         f"({len(beyond)})")


def test_each_fp8_profile_is_predicted_from_bf16_alone_and_with_the_other_models_fp8(bundled):
    _, data = bundled
    exps = [e for e in C.experiments(data) if e.kind in ("precision", "precision model")]
    fp8_models = {d.key.model for d in data if d.key.engine == "vllm" and d.key.precision == "fp8"}
    assert len(fp8_models) >= 2 and {e.target.split()[0] for e in exps} == fp8_models
    for exp in exps:
        targets = [d for d in data if d.key.engine == "vllm" and exp.is_target(d)]
        train = [d for d in data if d.key.engine == "vllm" and not exp.is_target(d) and exp.may_calibrate(d)]
        target_model = {d.key.model for d in targets}
        assert len(target_model) == 1 and {d.key.precision for d in targets} == {"fp8"}
        assert not target_model & {d.key.model for d in train if d.key.precision == "fp8"}
        train_fp8 = {d.key.model for d in train if d.key.precision == "fp8"}
        assert bool(train_fp8) == (exp.kind == "precision model")


def test_architectures_are_told_apart_from_their_configs():
    specs = bundled_model_specs()
    assert C.architecture(specs["llama-2-7b"]) == "mha dense"
    assert C.architecture(specs["llama-3.1-8b"]) == "gqa dense"
    assert C.architecture(specs["qwen3-30b-a3b"]) == "moe" and C.architecture(specs["mixtral-8x7b"]) == "moe"


def test_leaving_an_architecture_out_calibrates_only_on_the_others(bundled):
    _, data = bundled
    exps = [e for e in C.experiments(data) if e.kind == "architecture"]
    specs = bundled_model_specs()
    assert {e.target.split(" (")[0] for e in exps} == {"gqa dense", "mha dense", "moe"}
    for exp in exps:
        targets = {d.key.model for d in data if d.key.engine == "vllm" and exp.is_target(d)}
        train = {d.key.model for d in data if d.key.engine == "vllm" and not exp.is_target(d) and exp.may_calibrate(d)}
        assert targets and train and not targets & train
        assert {C.architecture(specs[m]) for m in targets}.isdisjoint({C.architecture(specs[m]) for m in train})


def test_an_experiment_never_calibrates_on_its_targets(bundled):
    _, data = bundled
    seen: list[str] = []

    def may(d: T.GroupData) -> bool:
        seen.append(d.key.model)
        return True
    exp = C.Experiment("model", "vllm", "qwen", lambda d: d.key.model == "qwen2.5-7b", may, "all")
    row = C.run_experiment(data, exp)
    assert row is not None and "qwen2.5-7b" not in seen
    nothing = C.Experiment("model", "vllm", "qwen", lambda d: d.key.model == "qwen2.5-7b", lambda d: False, "none")
    assert C.run_experiment(data, nothing) is None


def test_leaving_a_model_out_leaves_its_architectural_twin_out(bundled):
    _, data = bundled
    exps = [e for e in C.experiments(data) if e.kind == "model" and "llama-3.3-70b" in e.target]
    assert exps
    for exp in exps:
        train = [d for d in data if d.key.engine == "trtllm" and not exp.is_target(d) and exp.may_calibrate(d)]
        assert train and not {"llama-3.1-70b", "llama-3.3-70b"} & {d.key.model for d in train}


def test_published_fits_compare_before_and_after(bundled):
    profiles, _ = bundled
    table = C.published_fits(profiles)
    assert len(table) > 50 and table.filter(like="_pct").notna().all().all()
    summary = C.published_summary(table)
    assert summary["groups"] == len(table) and summary["before_max_pct"] >= summary["before_median_pct"]


def test_offered_precisions_follow_the_tensor_cores():
    assert C.offered("vllm", GPUS["h100"], "fp8") and not C.offered("vllm", GPUS["a100"], "fp8")
    assert C.offered("trtllm", GPUS["b200"], "fp4") and not C.offered("trtllm", GPUS["h200"], "fp4")
    assert not C.offered("vllm", GPUS["b200"], "fp4")


# ---------------------------------------------------------------- use: predict, models, plan (real files; the CLI's
# main() in this process: tests/planner/test_cli.py runs `python -m planner` itself)

def test_predict_transfers_to_an_unprofiled_model_and_gpu(tmp_path, capsys):
    from tests.planner.test_cli import invoke
    proc = invoke(capsys, "predict", "--gpu", "h100", "--engine", "vllm", "--model", "qwen2.5-32b", "--input-len",
                  "1000", "--output-len", "500", "--concurrency", "16", "--json")
    assert proc.returncode == 0, proc.stderr
    record = __import__("json").loads(proc.stdout)
    assert record["source_provenance"] == "transferred" and record["provenance"] == "transferred"
    assert record["group"].startswith("vllm ") and "/ h100 x1 / qwen2.5-32b bf16" in record["group"]
    assert 0 < record["low"] < record["output_tok_per_s"] < record["high"]
    # The table output's TRANSFERRED label: test_predict_from_a_config_file_and_bad_configs (one fit and
    # transfer calibration of the bundled profiles fewer).


def test_predict_from_a_config_file_and_bad_configs(tmp_path, capsys):
    from tests.planner.test_cli import invoke
    config = {"hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 4,
              "intermediate_size": 5632, "vocab_size": 32000, "max_position_embeddings": 4096}
    (tmp_path / "config.json").write_text(__import__("json").dumps(config), encoding="utf-8")
    ok = invoke(capsys, "predict", "--gpu", "l40s", "--engine", "vllm", "--model", "my-1b", "--model-config",
                tmp_path / "config.json", "--input-len", "256", "--output-len", "256", "--batch-size", "64")
    assert ok.returncode == 0, ok.stderr
    assert "my-1b bf16" in ok.stdout and "TRANSFERRED" in ok.stdout
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text('{"hidden_size": 8}', encoding="utf-8")
    bad = invoke(capsys, "predict", "--gpu", "h100", "--engine", "vllm", "--model", "x", "--model-config",
                 tmp_path / "bad", "--input-len", "1", "--output-len", "2", "--batch-size", "1")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --model-config") and "Traceback" not in bad.stderr
    unknown = invoke(capsys, "predict", "--gpu", "h100", "--engine", "vllm", "--model", "no-such-model", "--input-len",
                     "1", "--output-len", "2", "--batch-size", "1")
    assert unknown.returncode == 2 and "no facts for model 'no-such-model'" in unknown.stderr


def test_models_lists_the_bundled_configs(capsys):
    from tests.planner.test_cli import invoke
    proc = invoke(capsys, "models")
    assert proc.returncode == 0, proc.stderr
    for name in ("llama-3.2-1b", "llama-3.1-405b", "qwen2.5-72b", "qwen3-30b-a3b", "mixtral-8x22b", "gpt-oss-120b"):
        assert name in proc.stdout
    windows = {line.split()[0]: line.split()[-1] for line in proc.stdout.splitlines() if " x" in line}
    assert windows == {"gpt-oss-120b": "x18", "gpt-oss-20b": "x12", "mistral-7b": "x32"}  # windowed layers


def test_validate_transfer_prints_every_experiment(capsys):
    from tests.planner.test_cli import invoke
    proc = invoke(capsys, "validate", "--transfer")
    assert proc.returncode == 0, proc.stderr
    assert "model: qwen2.5-7b bf16 on h200" in proc.stdout and "precision: llama-3.1-8b fp8" in proc.stdout
    assert "tp: 70B tp1" in proc.stdout and "gpu: h100" in proc.stdout and "published-table fits" in proc.stdout


def test_plan_offers_transferred_options_only_where_no_profile_covers_them():
    from planner.planning.plan import make_plan
    from tests.conftest import bundled_catalog
    from tests.planner.fakes import online_route
    routes = pd.DataFrame([online_route("new", model="qwen2.5-14b"), online_route("known", model="llama-3.1-8b")])
    auto = make_plan(routes, bundled_catalog())
    opts = auto.options
    new, known = opts[opts.route == "new"], opts[opts.route == "known"]
    assert len(new) and (new.provenance == "transferred").all() and new.engine_version.str.endswith("+transfer").all()
    assert not known.engine_version.str.endswith("+transfer").any()  # auto: a profiled model keeps its profiles
    plan = auto.plan.set_index("route")
    assert plan.loc["new", "status"] == "ok" and plan.loc["new", "provenance"] == "transferred"
    every = make_plan(routes.iloc[1:], bundled_catalog("all")).options
    measured = {(r.engine, r.gpu, r.precision, r.tp) for r in every.itertuples() if "+transfer" not in r.engine_version}
    transferred = {(r.engine, r.gpu, r.precision, r.tp) for r in every.itertuples() if "+transfer" in r.engine_version}
    assert transferred and measured and not (measured & transferred)  # a profiled option is never transferred
    assert {"l40s", "a100", "b200"} <= {gpu for _, gpu, _, _ in transferred}
    off = make_plan(routes.iloc[:1], bundled_catalog("off"))
    assert off.plan.iloc[0]["status"] == "infeasible"


# ---------------------------------------------------------------- MoE physics and calibration

def test_an_moe_step_reads_its_experts_in_proportion_to_the_experts_touched():
    moe, dense = P.physics_matrix(target("qwen3-30b-a3b")), P.physics_matrix(target("llama-3.1-8b"))
    w = P.COEF_INDEX["weights"]
    assert dense[7, w] == 0.0 and moe[7, w] > 0.0
    # The routed experts are most of a 30B-A3B model's bytes; the rest (attention, LM head) is read every step.
    assert moe[7, w] > 5 * moe[0, w]
    assert moe[0, w] + moe[7, w] == pytest.approx(P.read_weight_bytes(target("qwen3-30b-a3b"))
                                                  / (GPUS["h200"].mem_bandwidth_tb_s * 1e12))
    assert T.transfer_caps(T.calibrate_engine(T.group_data(load_profiles()), "vllm"),
                           target("qwen3-30b-a3b")).expert_share == pytest.approx(8 / 128)


def test_a_sequence_beyond_the_cuda_graphs_costs_a_fixed_amount_and_per_routed_expert():
    g, graph, expert_graph = 6, P.COEF_INDEX["graph"], P.COEF_INDEX["expert_graph"]
    dense, moe = P.physics_matrix(target("llama-3.1-8b")), P.physics_matrix(target("qwen3-30b-a3b"))
    assert dense[g, graph] == moe[g, graph] == 1.0 and dense[g, expert_graph] == 0.0
    qwen3 = MODELS["qwen3-30b-a3b"]
    assert moe[g, expert_graph] == qwen3.num_layers * qwen3.experts_per_token
    # Tensor parallelism splits the routed pairs across GPUs, as it splits their other per-pair work.
    assert P.physics_matrix(target("qwen3-30b-a3b", tp=2))[g, expert_graph] == pytest.approx(moe[g, expert_graph] / 2)
    assert "expert_graph" in T.MOE_COEFS  # learnt from MoE profiles only (vLLM), zero until some are pooled


def test_an_moe_model_pays_a_per_step_cost_that_does_not_grow_with_its_layers():
    fixed, per_layer = P.COEF_INDEX["moe_fixed"], P.COEF_INDEX["moe_step"]
    dense, qwen3, olmoe = (P.physics_matrix(target(m)) for m in ("llama-3.1-8b", "qwen3-30b-a3b", "olmoe-1b-7b"))
    assert dense[0, fixed] == 0.0 and qwen3[0, fixed] == olmoe[0, fixed] == 1.0
    assert qwen3[0, per_layer] == 3 * olmoe[0, per_layer]  # 48 vs 16 layers: the per-layer term scales, this one not
    assert "moe_fixed" in T.MOE_COEFS


def test_vllm_decode_pays_per_routed_pair_on_its_default_fused_moe_config_only():
    a, untuned, pairs = 1, P.COEF_INDEX["untuned_pairs"], P.COEF_INDEX["expert_tokens"]
    olmoe, qwen3 = P.physics_matrix(target("olmoe-1b-7b")), P.physics_matrix(target("qwen3-30b-a3b"))
    assert olmoe[a, untuned] == olmoe[a, pairs] > 0.0  # no tuned H200 file for E=64, N=1024
    assert qwen3[a, untuned] == 0.0 < qwen3[a, pairs]  # a tuned file for E=128, N=768
    assert not P.physics_matrix(target("olmoe-1b-7b"))[3, untuned]  # decode only: prefill's large batches are not it
    assert not P.physics_matrix(target("olmoe-1b-7b", engine="trtllm"))[:, untuned].any()  # vLLM's kernel only
    assert not P.physics_matrix(target("llama-3.1-8b"))[:, untuned].any()
    assert "untuned_pairs" in T.MOE_COEFS


def test_vllm_moe_profiles_calibrate_only_the_moe_coefficients(bundled):
    _, data = bundled
    dense = [d for d in data if not (d.key.engine == "vllm" and d.target.model.is_moe)]
    assert len(dense) < len(data)  # the bundled data has vLLM MoE profiles
    pooled, dense_only = T.calibrate_engine(data, "vllm"), T.calibrate_engine(dense, "vllm")
    shared = [i for name, i in P.COEF_INDEX.items() if name not in T.MOE_COEFS]
    np.testing.assert_allclose(pooled.coef[shared], dense_only.coef[shared])
    assert any(pooled.coef[P.COEF_INDEX[name]] > 0 for name in T.MOE_COEFS) and len(pooled.groups) > len(dense_only.groups)


def test_each_moe_model_is_also_predicted_from_the_other_moe_models(bundled):
    _, data = bundled
    moe_out = [e for e in C.experiments(data) if e.kind == "moe model"]
    profiled = {d.key.model for d in data if d.key.engine == "vllm" and d.target.model.is_moe}
    assert {"mixtral-8x7b", "qwen3-30b-a3b", "olmoe-1b-7b", "granite-3.1-3b-a800m"} <= profiled
    assert {e.target.split(" bf16 on ")[0] for e in moe_out} == profiled
    assert "qwen3-30b-a3b bf16 on h100+h200" in {e.target for e in moe_out}  # the label names the cards measured
    for exp in moe_out:
        train = [d for d in data if d.key.engine == "vllm" and exp.may_calibrate(d)]
        assert any(d.target.model.is_moe for d in train) and not any(exp.is_target(d) for d in train)


def test_a_transferred_interval_spans_the_error_measured_for_its_architecture(bundled):
    profiles, data = bundled
    table = C.validate_transfer(profiles, data)
    errors = C.transfer_errors(table)
    moe_out = table[(table.engine == "vllm") & (table.kind == "moe model")]
    assert errors["vllm/moe"] == pytest.approx(moe_out.max_err_pct.median() / 100)
    assert errors["vllm/unseen"] == pytest.approx(table[table.kind == "architecture"].max_err_pct.max() / 100)
    transfer = T.build_transfer(profiles, errors, data)
    dense, moe = MODELS["qwen2.5-32b"], MODELS["qwen3-235b-a22b"]
    assert transfer.transfer_error("vllm", dense) == max(errors["vllm"], errors["vllm/gqa dense"])
    assert transfer.transfer_error("vllm", moe) == max(errors["vllm"], errors["vllm/moe"])
    unseen = dataclasses.replace(transfer, architectures={"vllm": frozenset({"gqa dense"})})
    assert unseen.transfer_error("vllm", moe) == max(errors["vllm"], errors["vllm/unseen"])
    wide = transfer.curve("vllm", moe, GPUS["h200"], "bf16", 8).predict_offline(1024, 256, 64)
    narrow = transfer.curve("vllm", dense, GPUS["h200"], "bf16", 1).predict_offline(1024, 256, 64)
    assert wide.high / wide.low > narrow.high / narrow.low


# ---------------------------------------------------------------- sliding windows

def _mistral_with_and_without_its_window(bundled):
    profiles, data = bundled
    transfer = T.build_transfer(profiles, {"vllm": 0.2}, data)
    windowed = MODELS["mistral-7b"]  # Mistral-7B-v0.1: every layer attends within 4,096 tokens
    full = dataclasses.replace(windowed, kv_layers=None, sliding_window=0)
    return (transfer.curve("vllm", windowed, GPUS["h100"], "bf16", 1),
            transfer.curve("vllm", full, GPUS["h100"], "bf16", 1))


def test_windowed_layers_read_and_attend_within_their_window(bundled):
    windowed, full = _mistral_with_and_without_its_window(bundled)
    assert (windowed.caps.window, windowed.caps.window_share) == (4096, 1.0)
    # Inside the window nothing changes
    assert windowed.step_time_s(8, 3000, 2048, 3000) == pytest.approx(full.step_time_s(8, 3000, 2048, 3000))
    assert windowed.predict_offline(3000, 64, 1).ttft_ms == pytest.approx(full.predict_offline(3000, 64, 1).ttft_ms)
    # Past it a decode step reads the window, not the context
    assert windowed.step_time_s(8, 24_000) == pytest.approx(full.step_time_s(8, 4096))
    # and a long prefill attends I*W - W^2/2 pairs per layer instead of I^2/2
    long_w, long_f = windowed.predict_offline(24_000, 64, 1), full.predict_offline(24_000, 64, 1)
    assert long_w.ttft_ms < long_f.ttft_ms
    chunk = windowed.step_time_s(0, 0, 8192, 24_000) - windowed.step_time_s(0, 0, 8192, 0)
    assert chunk == pytest.approx((full.step_time_s(0, 0, 8192, 24_000) - full.step_time_s(0, 0, 8192, 0))
                                  * (2 * 4096 - 4096**2 / 24_000) / 24_000)


def test_windowed_layers_hold_only_their_window_of_kv(bundled):
    windowed, full = _mistral_with_and_without_its_window(bundled)
    assert windowed.kv_cache_tokens == full.kv_cache_tokens  # the same memory, counted in tokens of every layer
    assert windowed.max_batch(24_000, 256) > 5 * full.max_batch(24_000, 256)


def test_the_simulator_serves_a_prompt_longer_than_the_kv_cache_where_the_window_holds_it(bundled):
    from planner.latency.simulate import simulate
    windowed, full = _mistral_with_and_without_its_window(bundled)
    prompt = full.kv_cache_tokens + 1000  # more than every layer could hold
    runs = {name: simulate(curve, [0.0, 1.0], [prompt, 2000], [16, 16])
            for name, curve in (("windowed", windowed), ("full", full))}
    assert np.isnan(runs["full"].ttft_s[0]) and np.isfinite(runs["full"].ttft_s[1])  # refused: it never fits
    assert np.isfinite(runs["windowed"].ttft_s).all()


def test_a_single_window_is_vllms_and_layer_windows_are_every_engines():
    """vLLM windows every layer of a config with one sliding_window (Mistral-7B-v0.1); TensorRT-LLM does not unless
    told to (its published Mistral-7B rows are full attention); layers a config names windowed are windowed by both."""
    from planner.engine.curves import window_caps
    mistral, oss = MODELS["mistral-7b"], MODELS["gpt-oss-20b"]
    assert window_caps(mistral, "vllm") == {"window": 4096, "window_share": 1.0}
    assert window_caps(mistral, "trtllm") == {}
    assert window_caps(oss, "vllm") == window_caps(oss, "trtllm") == {"window": 128, "window_share": 0.5}
    assert window_caps(MODELS["llama-3.1-8b"], "vllm") == {}


def test_the_simulator_steps_a_windowed_curve_in_closed_form(bundled):
    """The simulator keeps a windowed curve's steps affine (the window applied to the batch's summed context and to
    each prompt's attention): each step is the curve's own, a decode stretch is the sum of its steps across the
    point where the contexts pass the window, and steps_to inverts it."""
    from fleetfacts.specs import windowed_attention_len
    from planner.latency.simulate import step_model
    windowed, _ = _mistral_with_and_without_its_window(bundled)
    model = step_model(windowed)
    assert model.affine and model.window == (4096, 1.0)
    for b, ctx in ((1, 3000.0), (8, 8 * 3000.0), (8, 8 * 20_000.0), (64, 64 * 9000.0)):
        assert model.step(b, ctx, 0, 0) == pytest.approx(windowed.step_time_s(b, ctx / b))
    attention = windowed_attention_len(24_000, 4096, 1.0)
    assert model.step(4, 4 * 10_000.0, 8192, 8192 * attention) == pytest.approx(
        windowed.step_time_s(4, 10_000, 8192, 24_000))
    for b, ctx, n in ((8, 8 * 3500.0, 300), (16, 16 * 5000.0, 40), (3, 3 * 100.0, 5000)):
        steps = sum(model.step(b, ctx + b * j, 0, 0) for j in range(n))
        assert model.jump(b, ctx, n) == pytest.approx(steps, rel=1e-9)
        dt = model.jump(b, ctx, n)
        assert model.steps_to(b, ctx, dt) == n and model.jump(b, ctx, n - 1) < dt


def test_the_longest_context_a_replica_holds_counts_the_window(bundled):
    from planner.engine.curves import LONGEST_WINDOWED_CONTEXT, longest_held_context
    windowed, full = _mistral_with_and_without_its_window(bundled)
    assert longest_held_context(full) == full.kv_cache_tokens
    assert longest_held_context(windowed) == LONGEST_WINDOWED_CONTEXT  # every layer windowed: any context fits
    half = dataclasses.replace(windowed, caps=dataclasses.replace(windowed.caps, window_share=0.5))
    longest = longest_held_context(half)
    assert half.caps.kv_len(longest) <= half.kv_cache_tokens < half.caps.kv_len(longest + 2)
    assert longest > 1.9 * half.kv_cache_tokens
