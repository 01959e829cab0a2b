"""`measure campaign --ray` on a real local Ray cluster of two logical nodes with fake GPU-type resources,
driving the real CPU OpenAI server: a lost node mid-campaign, then --resume; no row lost or duplicated."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from measure.campaign.command import EXIT_INCOMPLETE
from tests.conftest import REPO
from tests.measure.campaign_helpers import assert_complete_once, profile_rows, wait_for_rows, write_campaign

ray = pytest.importorskip("ray", reason="Ray is an optional extra (pip install '.[ray]')")
cluster_utils = pytest.importorskip("ray.cluster_utils")

pytestmark = pytest.mark.slow
# Each logical node: one CPU for its task, one logical GPU and the GPU-type resource the jobs ask for.
NODE = {"num_cpus": 1, "num_gpus": 1}


@pytest.fixture
def cluster():
    """Head node 'l40s', worker node 'h200' (the one the test kills)."""
    c = cluster_utils.Cluster(initialize_head=True, head_node_args={**NODE, "resources": {"l40s": 1}})
    c.add_node(**NODE, resources={"h200": 1})
    c.wait_for_nodes()
    yield c
    c.shutdown()


def run_driver(path, address, *extra):
    return subprocess.Popen([sys.executable, "-m", "measure", "campaign", str(path), "--ray", address, *extra],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_lost_node_fails_its_job_others_finish_and_resume_completes(cluster, tiny_server, tmp_path):
    path = write_campaign(tmp_path, tiny_server["url"], [{"gpu": "h200", "shapes": "slow.csv"},
                                                         {"gpu": "l40s", "shapes": "fast.csv"},
                                                         {"gpu": "b200", "shapes": "fast.csv"}])
    h200 = tmp_path / "profiles" / "h200" / "openai-tiny-bf16-tp1"
    l40s = tmp_path / "profiles" / "l40s" / "openai-tiny-bf16-tp1"
    driver = run_driver(path, cluster.address)
    wait_for_rows(h200 / "profile.csv", 1, timeout_s=180)
    worker = next(n for n in cluster.worker_nodes)
    cluster.remove_node(worker)  # the h200 node dies mid-job
    out, err = driver.communicate(timeout=180)
    assert driver.returncode == EXIT_INCOMPLETE, err
    status = {j["gpu"]: j for j in json.loads(path.with_suffix(".status.json").read_text())["jobs"]}
    assert status["h200"]["state"] == "failed" and "NodeDied" in status["h200"]["error"]
    assert status["b200"]["state"] == "failed" and "no Ray node declares 1 GPU(s) of type 'b200'" in \
        status["b200"]["error"]
    assert status["l40s"]["state"] == "done" and status["l40s"]["node"]
    written = len(profile_rows(h200))
    assert 1 <= written < 4 and status["h200"]["ok"] == written
    assert_complete_once(l40s, tmp_path / "fast.csv")
    l40s_before = (l40s / "profile.csv").read_text()
    # a new h200 node joins; --resume plans only the missing h200 points (b200 still has no node)
    cluster.add_node(**NODE, resources={"h200": 1})
    cluster.wait_for_nodes()
    resumed = run_driver(path, cluster.address, "--resume")
    out, err = resumed.communicate(timeout=240)
    assert resumed.returncode == EXIT_INCOMPLETE, err
    assert_complete_once(h200, tmp_path / "slow.csv")
    assert (l40s / "profile.csv").read_text() == l40s_before
    env = json.loads((h200 / "env.json").read_text())
    assert len(env["runs"]) == 2 and all(r["engine"] == "openai" for r in env["runs"])
    status = {j["gpu"]: j for j in json.loads(path.with_suffix(".status.json").read_text())["jobs"]}
    assert status["h200"]["state"] == "done" and status["h200"]["ok"] == 4 - written

