"""Write fleetfacts/data/vllm_fused_moe_configs.csv: the tuned fused-MoE kernel configs a vLLM wheel ships.

vLLM's Triton fused-MoE kernel reads its tile sizes from
vllm/model_executor/layers/fused_moe/configs/E=<experts>,N=<width>,device_name=<GPU>[,dtype=..][,block_shape=..].json
(`get_config_file_name`: E and N from the expert weights on one rank, N the expert MLP width / TP; any
H200-family device reads the NVIDIA_H200 files). Without a file it logs "Using default MoE config.
Performance might be sub-optimal!" and runs a generic config. This lists the files of one wheel, with the
GPU slug of fleetfacts/data/gpu_specs.csv where the device name is one of ours (DEVICE_GPU).

    python tools/gen_vllm_moe_configs.py path/to/vllm-0.26.0-*.whl
"""

from __future__ import annotations

import csv
import re
import sys
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "fleetfacts" / "data" / "vllm_fused_moe_configs.csv"
CONFIG_DIR = "vllm/model_executor/layers/fused_moe/configs/"
NAME = re.compile(r"E=(\d+),N=(\d+),device_name=([^,]+?)(?:,dtype=([^,]+?))?(?:,block_shape=\[([\d,]+)\])?\.json$")
# vLLM's device names (torch's, spaces as underscores) of the GPUs in gpu_specs.csv. "NVIDIA_H100" alone is
# not mapped: it names no one SKU.
DEVICE_GPU = {"NVIDIA_H200": "h200", "NVIDIA_H100_80GB_HBM3": "h100", "NVIDIA_H100_PCIe": "h100-pcie",
              "NVIDIA_A100-SXM4-80GB": "a100", "NVIDIA_A100-SXM4-40GB": "a100-40gb", "NVIDIA_L40S": "l40s",
              "NVIDIA_B200": "b200", "NVIDIA_B300_SXM6_AC": "b300", "NVIDIA_GB200": "gb200",
              "NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition": "rtx-pro-6000"}
COLUMNS = ("engine_version", "device_name", "gpu", "num_experts", "n", "dtype", "block_shape", "source", "date")
DATE = "2026-12-04"


def main(wheel: str) -> None:
    version = re.search(r"vllm-([^-]+)-", Path(wheel).name)
    if version is None:
        raise SystemExit(f"{wheel}: not a vllm wheel name (vllm-<version>-...whl)")
    with zipfile.ZipFile(wheel) as archive:
        names = sorted(n[len(CONFIG_DIR):] for n in archive.namelist() if n.startswith(CONFIG_DIR))
    rows = []
    for name in names:
        match = NAME.match(name)
        if match is None:
            continue  # the README, and AMD files of another backend (`,backend=...`), which this path never reads
        experts, n, device, dtype, block = match.groups()
        rows.append({"engine_version": version.group(1), "device_name": device, "gpu": DEVICE_GPU.get(device, ""),
                     "num_experts": experts, "n": n, "dtype": dtype or "", "block_shape": block or "",
                     "source": f"https://github.com/vllm-project/vllm/tree/v{version.group(1)}/{CONFIG_DIR}{name}",
                     "date": DATE})
    with open(OUT, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"{OUT}: {len(rows)} configs of vLLM {version.group(1)}")


if __name__ == "__main__":
    main(sys.argv[1])
