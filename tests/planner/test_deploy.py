"""`python -m planner deploy` on the bundled example: every format, manifests checked against the Kubernetes schema."""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
import shutil
from pathlib import Path

import kubernetes_validate
import pandas as pd
import pytest
import yaml

from fleetfacts.errors import InputError
from fleetfacts.schema import load_plan_rows
from planner.cli import main
from planner.planning import deploy
from planner.planning.plan_pair import DIGEST_KEY, csv_digest
from planner.sizing.plan_row import plan_rows
from tests.conftest import cli_fits_bundled_once

ROOT = Path(__file__).resolve().parents[2]
# Kubernetes release whose OpenAPI schema the manifests are checked against (strict: unknown fields fail).
K8S_VERSION = "1.37.0"


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    """The example routes' plan, code-completion on the H200 alone: there its autoscaled option beats steady (on
    the H100's FP8 curve it needs 4 steady replicas and cannot), so one route gets an HPA; chat on TensorRT-LLM
    alone, so that one route is served by it."""
    folder = tmp_path_factory.mktemp("plan")
    shutil.copytree(ROOT / "examples" / "traces", folder / "traces")
    routes = pd.read_csv(ROOT / "examples" / "routes.csv", dtype={"gpus": "object", "engines": "object"})
    routes.loc[routes["name"] == "code-completion", "gpus"] = "h200"
    routes.loc[routes["name"] == "chat", "engines"] = "trtllm"
    routes.to_csv(folder / "routes.csv", index=False)
    path = folder / "plan.csv"
    with cli_fits_bundled_once():
        assert main(["plan", "--routes", str(folder / "routes.csv"), "--out", str(path)]) == 0
    return path


@pytest.fixture(scope="module")
def rows(plan):
    return {r.route: r for r in plan_rows(load_plan_rows(plan)) if r.ok}


def _deploy(plan, out, fmt, *extra):
    return main(["deploy", "--plan", str(plan), "--format", fmt, "--out", str(out), *extra])


def _serve_argv(text: str, program: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith(f"exec {program}"))
    return shlex.split(line)[2:]


def _flags(argv: list[str]) -> dict[str, str]:
    return {a: (argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else "")
            for i, a in enumerate(argv) if a.startswith("--")}


def test_vllm_commands_run_what_the_profile_measured(plan, rows, tmp_path):
    assert _deploy(plan, tmp_path, "vllm") == 0
    vllm_rows = {k: r for k, r in rows.items() if r.engine == "vllm"}
    assert vllm_rows, "the example plan has a vLLM route"
    for route, row in vllm_rows.items():
        text = (tmp_path / f"{route}.vllm.sh").read_text()
        flags = _flags(_serve_argv(text, "vllm"))
        env_path = ROOT / row.profile.split(";")[0]
        run = json.loads((env_path.parent / "env.json").read_text())["runs"][-1]
        assert "line " in text and row.profile in text and "env.json" in text  # where it came from
        assert flags["--tensor-parallel-size"] == str(row.tp)
        assert flags["--max-model-len"] == str(row.max_model_len)
        assert int(flags["--max-num-seqs"]) == run["max_num_seqs"] >= row.in_flight_p99
        assert int(flags["--max-num-batched-tokens"]) == run["max_num_batched_tokens"]
        for key, value in run["effective_engine_args"].items():
            if key in deploy.MEASUREMENT_ONLY_ARGS:
                continue
            flag = "--" + key.replace("_", "-")
            expected = json.dumps(value, separators=(",", ":")) if isinstance(value, dict) else str(value)
            assert flags.get(flag) == expected, (route, flag)
        assert "--load-format" not in flags and "dummy" not in text


def test_trtllm_files_per_engine_version(plan, rows, tmp_path):
    assert _deploy(plan, tmp_path, "trtllm") == 0
    for route, row in rows.items():
        if row.engine != "trtllm":
            continue
        script = (tmp_path / f"{route}.trtllm.sh").read_text()
        options = yaml.safe_load((tmp_path / f"{route}.trtllm-options.yaml").read_text())
        assert options["max_batch_size"] >= row.in_flight_p99
        flags = _flags(_serve_argv(script, "trtllm-serve"))
        assert flags["--tp_size"] == str(row.tp) and flags["--extra_llm_api_options"].endswith("options.yaml")
        old = deploy.trtllm_flow(row.engine_version) == "engine"
        assert ("trtllm-build" in script) == old
        if old:
            build = _flags(shlex.split(next(line for line in script.splitlines() if line.startswith("trtllm-build"))))
            assert build["--max_batch_size"] == str(options["max_batch_size"])
            assert build["--max_seq_len"] == str(row.max_model_len)


def test_trtllm_1x_serves_the_checkpoint_without_a_build(rows):
    row = dataclasses.replace(next(r for r in rows.values() if r.engine == "trtllm"), engine_version="1.1.0")
    target = deploy.Target.from_row(row, "plan.csv", 2)
    files = deploy.deployment_files("trtllm", target, deploy.EngineSettings.none_recorded("p.csv"), "org/model")
    script = files[0].text
    assert "trtllm-build" not in script and "--backend pytorch" in script


def _documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_k8s_manifests_validate_against_the_kubernetes_schema(plan, rows, tmp_path):
    assert _deploy(plan, tmp_path, "k8s", "--min-replicas", "1") == 0
    for route, row in rows.items():
        docs = _documents(tmp_path / f"{route}.k8s.yaml")
        for doc in docs:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        kinds = {d["kind"]: d for d in docs}
        deployment = kinds["Deployment"]
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        assert deployment["spec"]["replicas"] == row.replicas
        assert container["resources"]["limits"]["nvidia.com/gpu"] == str(row.tp)
        assert container["readinessProbe"]["httpGet"]["path"] == "/health"
        assert deployment["metadata"]["annotations"]["fleetplan.io/profile"] == row.profile
        assert "Service" in kinds
        scales = row.traffic == "online" and row.replicas > 1  # batch routes get none (issue 47 §7)
        assert ("HorizontalPodAutoscaler" in kinds) == scales
        if scales:
            hpa = kinds["HorizontalPodAutoscaler"]["spec"]
            assert (hpa["minReplicas"], hpa["maxReplicas"]) == (1, row.replicas)


def test_the_schema_check_can_fail(plan, tmp_path):
    """The validator rejects a manifest with a wrongly typed field (the check above is not vacuous)."""
    assert _deploy(plan, tmp_path, "k8s") == 0
    doc = _documents(next(tmp_path.glob("*.k8s.yaml")))[0]
    doc["spec"]["replicas"] = "three"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_a_batch_cap_below_the_operating_point_is_refused(rows):
    row = next(r for r in rows.values() if r.engine == "vllm")
    target = deploy.Target.from_row(dataclasses.replace(row, in_flight_p99=5000.0), "plan.csv", 3)
    settings = deploy.EngineSettings("env.json", {}, max_num_seqs=1024)
    with pytest.raises(InputError, match="operates at 5000 sequences per replica but the profile ran with"):
        deploy.deployment_files("vllm", target, settings, "org/model")


def test_bad_requests_get_one_line_errors(plan, tmp_path, capsys):
    assert main(["deploy", "--plan", str(plan), "--format", "vllm", "--route", "nope"]) == 2
    assert "no route 'nope'" in capsys.readouterr().err
    old = tmp_path / "old.csv"  # a plan written before deploy existed: no model / max_model_len columns
    frame = load_plan_rows(plan).drop(columns=["model", "max_model_len", "profile"])
    frame.to_csv(old, index=False)
    assert main(["deploy", "--plan", str(old), "--format", "k8s"]) == 2
    err = capsys.readouterr().err
    assert "column 'model': empty; re-run `python -m planner plan`" in err and len(err.strip().splitlines()) == 1


def test_a_tp_that_does_not_divide_the_heads_is_refused(rows):
    row = next(r for r in rows.values() if r.engine == "vllm")  # llama-3.1-8b: 32 attention heads
    with pytest.raises(InputError, match="column 'tp': 3 does not divide llama-3.1-8b's 32 attention heads"):
        deploy.Target.from_row(dataclasses.replace(row, tp=3), "plan.csv", 3)
    assert deploy.Target.from_row(dataclasses.replace(row, tp=4), "plan.csv", 3).tp == 4


def test_a_precision_without_a_vllm_recipe_is_refused_not_served_as_auto(rows):
    row = next(r for r in rows.values() if r.engine == "vllm")
    target = deploy.Target.from_row(dataclasses.replace(row, precision="int4"), "plan.csv", 3)
    with pytest.raises(InputError, match="precision 'int4' has no vLLM serving recipe"):
        deploy.deployment_files("vllm", target, deploy.EngineSettings("env.json", {}), "org/model")
    recorded = deploy.EngineSettings("env.json", {"dtype": "half", "quantization": "awq"})
    assert "--dtype" in deploy.vllm_args(target, recorded, "org/model")


def test_deploy_states_the_router_the_plan_sized_its_replicas_behind(plan, tmp_path):
    """The fleet was sized and judged behind the plan's router (its row's `router`): every multi-replica online
    route's files say which, the Kubernetes objects carry it, and a least-outstanding plan says a plain Service is
    not one."""
    out = tmp_path / "k8s"
    assert _deploy(plan, out, "k8s") == 0
    code = (out / "code-completion.k8s.yaml").read_text()
    assert "behind a least-outstanding load balancer" in code and "a plain Kubernetes Service" in code
    assert all(d["metadata"]["annotations"][f"{deploy.ANNOTATION}router"] == "least-outstanding"
               for d in _documents(out / "code-completion.k8s.yaml"))
    assert "load balancer" not in (out / "summarise-batch.k8s.yaml").read_text()  # a batch job has no router
    # Re-planned with round robin: the files say so, and nothing asks for a least-request balancer.
    assumptions = plan.with_name("plan.assumptions.json")
    data = json.loads(assumptions.read_text())
    rr = tmp_path / "rr"
    rr.mkdir()
    data["assumptions"]["router"] = "round-robin"
    csv = plan.read_bytes().replace(b",least-outstanding,", b",round-robin,")  # its rows too
    (rr / "plan.assumptions.json").write_text(json.dumps({**data, DIGEST_KEY: csv_digest(csv)}))
    (rr / "plan.csv").write_bytes(csv)
    assert _deploy(rr / "plan.csv", tmp_path / "k8s-rr", "k8s") == 0
    text = (tmp_path / "k8s-rr" / "code-completion.k8s.yaml").read_text()
    assert "behind a round-robin load balancer" in text and "a plain Kubernetes Service" not in text


@pytest.mark.parametrize("names", [("Chat", "chat"), ("chat!", "chat?"), ("对话", "聊天"), ("2nd-chat", "-inf"),
                                   ("a" * 49 + "-x", "a" * 49 + "-y")])
def test_two_routes_never_share_a_name_and_every_name_is_a_dns_label(plan, tmp_path, names):
    """Routes whose names reduce alike (case, punctuation, a non-Latin script, a long common start) each get their
    own files and objects, named as a Kubernetes Service must be (DNS-1035: a letter first, at most 63 characters)."""
    text = plan.read_text().splitlines()
    header, body = text[0], [line for line in text[1:] if line.startswith(("chat,", "code-completion,"))]
    assert len(body) == 2
    renamed = [f"{json.dumps(name, ensure_ascii=False)},{line.split(',', 1)[1]}"
               for name, line in zip(names, body, strict=True)]
    copy = tmp_path / "plan.csv"
    copy.write_text("\n".join([header, *renamed]) + "\n", encoding="utf-8")
    out = tmp_path / "k8s"
    assert _deploy(copy, out, "k8s") == 0
    files = sorted(out.glob("*.k8s.yaml"))
    assert len(files) == 2
    deployments = {}
    for path in files:
        for doc in _documents(path):
            name = doc["metadata"]["name"]
            assert re.fullmatch(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?", name), name
            if doc["kind"] == "Deployment":
                deployments[name] = doc["metadata"]["annotations"][f"{deploy.ANNOTATION}route"]
    assert sorted(deployments.values()) == sorted(names) and len(deployments) == 2


def test_k8s_takes_the_plans_autoscaled_floor_unless_told_otherwise(plan, rows, tmp_path):
    """Without --min-replicas, a route whose autoscaled option beats steady gets an HPA from its autoscaled floor
    to its replicas, scaling down as slowly as the plan's simulated autoscaler; one where it cannot gets none."""
    assert _deploy(plan, tmp_path, "k8s") == 0
    for route, row in rows.items():
        kinds = {d["kind"]: d for d in _documents(tmp_path / f"{route}.k8s.yaml")}
        scales = row.autoscaled_floor is not None and row.autoscaled_floor < (row.replicas or 0)
        assert ("HorizontalPodAutoscaler" in kinds) == scales, route
        if scales:
            hpa = kinds["HorizontalPodAutoscaler"]
            kubernetes_validate.validate(hpa, K8S_VERSION, strict=True)
            spec = hpa["spec"]
            assert (spec["minReplicas"], spec["maxReplicas"]) == (row.autoscaled_floor, row.replicas)
            assert spec["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 300
    assert any(r.autoscaled_floor is not None and r.autoscaled_floor < (r.replicas or 0) for r in rows.values())


# ------------------------------------------------------------------ issue 47 §7: --min-replicas says what it does

def _hpa_routes(folder: Path) -> set[str]:
    return {p.name.removesuffix(".k8s.yaml") for p in folder.glob("*.k8s.yaml")
            if any(d["kind"] == "HorizontalPodAutoscaler" for d in _documents(p))}


@pytest.mark.parametrize("value", ["-1", "0"])
def test_a_min_replicas_below_one_is_refused(plan, tmp_path, capsys, value):
    assert _deploy(plan, tmp_path / "out", "k8s", "--min-replicas", value) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --min-replicas {value}: ") and "at least 1" in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("fmt", ["vllm", "trtllm"])
def test_min_replicas_beside_a_script_format_is_refused(plan, tmp_path, capsys, fmt):
    assert _deploy(plan, tmp_path / "out", fmt, "--min-replicas", "2") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --min-replicas: ") and "--format k8s" in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_a_min_replicas_not_below_a_routes_replicas_says_which_hpas_were_dropped(plan, rows, tmp_path, capsys):
    assert _deploy(plan, tmp_path, "k8s", "--min-replicas", "99") == 0
    err = capsys.readouterr().err
    assert err.startswith("warning: --min-replicas 99: no HPA for ") and err.count("\n") == 1, err
    for route, row in rows.items():
        assert f"{route} ({row.replicas} replica" in err or (row.traffic == "batch" and f"{route} (batch" in err)
    assert _hpa_routes(tmp_path) == set()


def test_batch_routes_get_no_hpa_and_the_warning_says_so(plan, rows, tmp_path, capsys):
    """A batch job runs its deadline's replicas and stops: an HPA on running requests would scale it down mid-job."""
    from fleetfacts.schema import write_csv  # noqa: PLC0415

    frame = load_plan_rows(plan)
    batch = frame["traffic"] == "batch"
    assert batch.any(), "the example plans a batch route"
    frame.loc[batch, "replicas"] = 3  # a copy with no assumptions beside it: a batch route on 3 replicas
    copy = tmp_path / "batch3.csv"
    write_csv(frame, copy)
    assert _deploy(copy, tmp_path / "out", "k8s", "--min-replicas", "1") == 0
    err = capsys.readouterr().err
    assert all(f"{r} (batch" in err for r in frame.loc[batch, "route"]), err
    online = {r for r, row in rows.items() if row.traffic == "online" and row.replicas > 1}
    assert _hpa_routes(tmp_path / "out") == online and online
