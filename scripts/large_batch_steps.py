"""Diagnostic (issue 38): what a large-batch decode step costs per sequence, by engine setting and machine.

For every measured vLLM profile row of an offline run with short prompts (input_len <= 128) and a batch of at
least 512, prints the time per sequence per decode step, 1 / output tok/s (each step emits one token per
running sequence), beside what the row's engine ran with (max_model_len and the CUDA-graph capture size, from
the folder's env.json) and the machine (the GPU; the host CPU where env.json records it). Rows of one model
that differ only in those settings show how much of the step is the engine's and the host's, not the model's.

    .venv/bin/python scripts/large_batch_steps.py [model filter]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
MEASURED = REPO / "profiles" / "measured"
DEFAULT_GRAPHS = 512  # vLLM 0.26's largest captured batch unless compilation_config says otherwise
MIN_BATCH = 512
MAX_PROMPT = 128


def engine_settings(folder: Path) -> dict[str, object]:
    """max_model_len, graph capture size and host CPU of the folder's last run (None where not recorded)."""
    env_file = folder / "env.json"
    if not env_file.exists():
        return {"max_model_len": None, "graphs": None, "cpu": None}
    runs = json.loads(env_file.read_text()).get("runs") or [{}]
    args = runs[-1].get("effective_engine_args") or {}
    compilation = args.get("compilation_config") or {}
    cpu = runs[-1].get("cpu") or {}
    return {"max_model_len": args.get("max_model_len"),
            "graphs": compilation.get("max_cudagraph_capture_size", DEFAULT_GRAPHS),
            "cpu": cpu.get("model") if isinstance(cpu, dict) else cpu}


def rows(model_filter: str = "") -> pd.DataFrame:
    out = []
    for csv in sorted(MEASURED.glob("*/vllm-*/*profile.csv")):
        table = pd.read_csv(csv)
        keep = (table["mode"] == "offline") & (table["status"] == "ok") & (table["input_len"] <= MAX_PROMPT) \
            & (table["batch_size"] >= MIN_BATCH) & table["model"].str.contains(model_filter, regex=False)
        for _, row in table[keep].iterrows():
            out.append({"model": row["model"], "precision": row["precision"], "gpu": row["gpu"],
                        "folder": csv.parent.name, **engine_settings(csv.parent),
                        "shape": f"{row.input_len:g}/{row.output_len:g} x {row.batch_size:g}",
                        "us_per_sequence_step": 1e6 / float(row["output_tok_per_s"])})
    return pd.DataFrame(out)


def main(model_filter: str = "") -> None:
    table = rows(model_filter)
    if table.empty:
        print("no such rows")
        return
    table = table.sort_values(["model", "precision", "shape", "gpu", "max_model_len"])
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.1f}"))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
