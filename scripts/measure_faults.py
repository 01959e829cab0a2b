"""The longer run of measure's kill-and-resume fault test (tests/measure/test_faults.py runs a short one in CI).

Starts the stub OpenAI-compatible server (measure/stub_openai.py) on 127.0.0.1, then runs
`python -m measure profile --engine openai --resume` against it again and again, SIGKILLing it after a random
delay, KILLS times, then once to the end.  Checks that every point has exactly one ok row, no row is duplicated,
and the planner's loader reads the file.  Prints what it did; exit 1 on a broken promise.

    python scripts/measure_faults.py [--kills 20] [--points 12] [--seed 0]
"""

from __future__ import annotations

import argparse
import csv
import random
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a file: the project's packages are imported from the checkout

from fleetfacts.schema import PROFILE, load_table  # noqa: E402
from measure.stub_openai import start_stub  # noqa: E402

# Kill delays are drawn up to this many seconds: start-up (imports, warm-up) plus a few points.
MAX_KILL_S = 6.0
FINAL_TIMEOUT_S = 300


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--points", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    try:
        url, stub = start_stub()
    except RuntimeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="measure-faults-"))
    shapes, out = work / "shapes.csv", work / "profiles" / "p"
    outputs = list(range(5, 5 + args.points))
    shapes.write_text("mode,input_len,output_len,concurrency,num_requests\n"
                      + "".join(f"concurrency,8,{o},2,4\n" for o in outputs))
    argv = [sys.executable, "-m", "measure", "profile", "--gpu", "h200", "--engine", "openai", "--model",
            "llama-3.1-8b", "--shapes", str(shapes), "--out", str(out), "--base-url", url, "--no-ignore-eos", "--resume"]
    try:
        for i in range(args.kills):
            delay = rng.uniform(0.3, MAX_KILL_S)
            proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                proc.wait(timeout=delay)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            print(f"kill {i + 1}/{args.kills} after {delay:.2f} s (exit {proc.returncode})")
        done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=FINAL_TIMEOUT_S)
    finally:
        stub.kill()
    return _check(out, outputs, done)


def _check(out: Path, outputs: list[int], done: subprocess.CompletedProcess) -> int:
    with open(out / "profile.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    ok = sorted(int(r["output_len"]) for r in rows if r["status"] == "ok")
    load_table(out / "profile.csv", PROFILE)
    torn = (out / "profile.csv.torn").is_file()
    print(f"final run exit {done.returncode}; {len(rows)} rows, {len(ok)} ok, torn rows set aside: {torn}")
    if done.returncode != 0 or ok != outputs:
        print(f"BROKEN: expected one ok row per point {outputs}, got {ok}\n{done.stderr[-2000:]}")
        return 1
    print(f"ok: every point exactly once ({out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
