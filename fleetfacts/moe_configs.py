"""Whether vLLM runs a model's fused-MoE kernel with a tuned config on a GPU.

vLLM's Triton fused-MoE kernel takes its tile sizes from a JSON file named by the expert count E, the expert
MLP width on one rank N, the GPU and the weight dtype; without one it logs "Using default MoE config" and runs
a generic config. On the H200 (vLLM 0.26) the two MoE models without a file (OLMoE-1B-7B, Granite-3.1-3B-A800M)
cost more per routed (token, expert) pair in decode than the two with one (Mixtral-8x7B, Qwen3-30B-A3B):
planner.engine.transfer gives that its own coefficient. The files a wheel ships are listed in
fleetfacts/data/vllm_fused_moe_configs.csv (tools/gen_vllm_moe_configs.py writes it from the wheel).
"""

from __future__ import annotations

import csv
from functools import lru_cache

from fleetfacts.errors import InputError
from fleetfacts.specs import DATA_DIR, ModelSpec, slug

VLLM_MOE_CONFIGS_CSV = DATA_DIR / "vllm_fused_moe_configs.csv"
# The dtype part of the file name for a weight precision on the Triton fused-MoE path ("" for 16-bit weights).
# Other precisions and natively MXFP4 checkpoints (gpt-oss) run other MoE kernels: the rule does not apply.
TRITON_DTYPE = {"bf16": "", "fp16": "", "fp8": "fp8_w8a8"}
MXFP4 = "mxfp4"


@lru_cache(maxsize=1)
def _tuned_shapes() -> frozenset[tuple[str, int, int, str]]:
    """(gpu slug, E, N, dtype) of every shipped config whose device is one of ours (block shapes not told apart)."""
    try:
        with open(VLLM_MOE_CONFIGS_CSV, newline="") as handle:
            return frozenset((r["gpu"], int(r["num_experts"]), int(r["n"]), r["dtype"])
                             for r in csv.DictReader(handle) if r["gpu"])
    except (OSError, KeyError, ValueError) as err:
        raise InputError(f"{VLLM_MOE_CONFIGS_CSV}: unreadable ({err})") from None


def vllm_moe_config_tuned(gpu: str, model: ModelSpec, precision: str, tp: int) -> bool | None:
    """True when vLLM ships a tuned fused-MoE config for this model's expert shape on this GPU at this precision
    and TP, False when it runs its default one, None when the rule does not apply (a dense model, an expert width
    the facts lack, a precision or checkpoint format off the Triton path)."""
    dtype = TRITON_DTYPE.get(slug(precision))
    if not model.is_moe or not model.expert_intermediate_size or dtype is None or model.native_quant == MXFP4:
        return None
    return (slug(gpu), *fused_moe_shape(model, tp), dtype) in _tuned_shapes()


def fused_moe_shape(model: ModelSpec, tp: int) -> tuple[int, int]:
    """(E, N) as vLLM names a config file: the routed experts, and an expert's MLP width on one of `tp` GPUs."""
    return model.num_experts, model.expert_intermediate_size // max(tp, 1)
