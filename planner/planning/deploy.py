"""Launch configs for a plan row: the `vllm serve` command, `trtllm-serve` + its options, Kubernetes manifests.

Pure: takes a plan row (planner.sizing.plan_row.PlanRow) and the engine settings its profile was measured
with (`EngineSettings.from_env`, from the profile's env.json), returns `DeployFile`s
(name + text); writing them is the CLI's job.  The deployment runs what was measured:
every engine setting the profile recorded is passed on, except the ones that only
made sense for the measurement (dummy weights, the sweep's seed and context length);
the plan fixes the tensor-parallel size, the context (the route's p99 prompt + output)
and checks that the engine's batch cap holds the operating point.  Every file starts
with the plan row and the profile it came from.  Not verified on hardware yet.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shlex
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from packaging.version import InvalidVersion, Version

from fleetfacts.errors import InputError
from fleetfacts.specs import bundled_model_sources, bundled_model_specs
from planner.latency import DEFAULT_ROUTER
from planner.sizing.autoscaled import SCALE_DOWN_S
from planner.sizing.plan_row import PlanRow

FORMATS = ("vllm", "trtllm", "k8s")
# Port every generated server listens on (vLLM's and trtllm-serve's default).
PORT = 8000
# Files and Kubernetes objects are named after the route: at most this long, so that suffixes such as
# "-trtllm-options" keep the name within the 63 characters of a DNS label.
NAME_MAX = 47
HASH_CHARS = 8
# Engine arguments recorded by a measurement that a deployment must not copy: the tokenizer-less dummy
# weights (load_format, skip_tokenizer_init), the checkpoint path on the measuring host (model), the sweep's
# seed and stats switch, and the sizes the plan sets itself (tensor_parallel_size, max_model_len).
MEASUREMENT_ONLY_ARGS = ("model", "load_format", "skip_tokenizer_init", "seed", "disable_log_stats",
                         "tensor_parallel_size", "max_model_len", "max_num_seqs", "max_num_batched_tokens")
# vLLM's dtype for a plan precision when the profile recorded none (as measure/engines/vllm_offline.py sets it).
VLLM_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp8": "bfloat16"}
# TensorRT-LLM moved to the PyTorch LLM API (no engine build) at 1.0; before it, a checkpoint is converted
# and an engine built per model update (docs: TensorRT-LLM "Build a TensorRT engine", 0.x releases).
TRTLLM_LLM_API_VERSION = Version("1.0")
# Official images: docker hub vllm/vllm-openai, NGC nvcr.io/nvidia/tensorrt-llm/release.
IMAGES = {"vllm": "vllm/vllm-openai:v{version}", "trtllm": "nvcr.io/nvidia/tensorrt-llm/release:{version}"}
# Metric the HPA scales on: requests running per pod (vLLM's Prometheus gauge, exposed to the HPA through a
# metrics adapter such as prometheus-adapter); its target is the plan's in_flight_p99 (requests in flight per replica, 99th percentile).
HPA_METRIC = "vllm:num_requests_running"
# What would end a generated file's comment line (or hide text in it) if written raw: C0 and C1 controls
# (newline, carriage return, NUL, ESC ...), DEL, YAML's other line breaks (NEL, LS, PS), bidirectional
# overrides and the byte-order mark.  User text (route names, file names) in comments is escaped instead.
COMMENT_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]")
HUB_RE = re.compile(r"huggingface\.co/([\w.-]+/[\w.-]+)")
ANNOTATION = "fleetplan.io/"


@dataclass(frozen=True)
class EngineSettings:
    """The engine settings a profile was measured with (from its env.json), and where they come from."""

    source: str
    args: Mapping[str, Any] = field(default_factory=dict)
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, Any], source: str) -> EngineSettings:
        """From a profile's env.json: the last run's effective engine arguments (in-process engines), or the
        arguments given (server runs, whose effective record is a command line), and the engine's caps."""
        runs = env.get("runs") or [env]
        run = runs[-1]
        effective = run.get("effective_engine_args") or {}
        args = (run.get("engine_args") or {}) if "command" in effective else effective
        kept = {k: v for k, v in args.items() if k not in MEASUREMENT_ONLY_ARGS and v is not None}
        return cls(source, kept, _int(run.get("max_num_seqs") or args.get("max_num_seqs")),
                   _int(run.get("max_num_batched_tokens") or args.get("max_num_batched_tokens")))

    @classmethod
    def none_recorded(cls, profile: str) -> EngineSettings:
        """A profile with no env.json (published figures): the engine's defaults, said so."""
        return cls(f"{profile or 'the profile'} records no engine settings (published); engine defaults")


def _int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


@dataclass(frozen=True)
class Target:
    """One plan row to deploy: what the plan chose and how it sized it."""

    route: str
    model: str
    engine: str
    engine_version: str
    gpu: str
    precision: str
    tp: int
    replicas: int
    in_flight_p99: float
    max_model_len: int
    profile: str
    plan_file: str
    line: int
    router: str = DEFAULT_ROUTER
    traffic: str = "online"
    object_name: str = ""  # unique within the plan (object_names); "" for the route's own base_name
    autoscaled_floor: int | None = None  # the plan's autoscaled option (planner.sizing.autoscaled)
    prefix_cache: bool = False  # the plan counted prefix-cache hits (its prefix_hit_rate_pred is not blank)
    host_kv_gib: float = 0.0  # GiB of host memory per replica the plan assumed as a KV tier (0: none)

    @classmethod
    def from_row(cls, row: PlanRow, plan_file: str, line: int, router: str = DEFAULT_ROUTER,
                 object_name: str = "") -> Target:
        """From a plan row with status ok (its own `router` where the plan wrote one, else `router`); raises
        InputError naming what the row lacks."""
        where = f"{plan_file}, line {line} (route {row.route!r})"
        if not row.ok:
            raise InputError(f"{where}: status {row.status!r}, nothing to deploy ({row.notes})")
        for column in ("model", "engine", "gpu", "precision", "tp", "replicas", "max_model_len"):
            if _blank(getattr(row, column)):
                raise InputError(f"{where}, column {column!r}: empty; re-run `python -m planner plan` "
                                 "(plans written before deploy existed lack it)")
        assert row.tp is not None and row.replicas is not None and row.max_model_len is not None
        target = cls(row.route, row.model, row.engine, row.engine_version, row.gpu, row.precision, row.tp,
                     row.replicas, row.in_flight_p99, row.max_model_len, row.profile, plan_file, line,
                     row.router or router, row.traffic or "online", object_name, row.autoscaled_floor,
                     not math.isnan(row.prefix_hit_rate_pred),
                     0.0 if row.host_kv_gib is None or math.isnan(row.host_kv_gib) else float(row.host_kv_gib))
        _check_tp(target, where)
        return target

    @property
    def name(self) -> str:
        """The name of its files and Kubernetes objects: `object_name`, else the route's own (`base_name`)."""
        return self.object_name or base_name(self.route) or "route"

    @property
    def batch_needed(self) -> int | None:
        """Sequences per replica the plan operates at (rounded up); None when the plan gives none."""
        return None if math.isnan(self.in_flight_p99) else max(1, math.ceil(self.in_flight_p99))


def base_name(route: str) -> str:
    """A route's name as a DNS-1035 label (what a Kubernetes Service name must be): lower-case letters, digits and
    '-', starting with a letter, ending with a letter or digit, at most NAME_MAX characters; "" when nothing is left."""
    name = re.sub(r"[^a-z0-9-]+", "-", route.lower()).strip("-")
    if name and not name[0].isalpha():
        name = "r-" + name
    return name[:NAME_MAX].rstrip("-")


def object_names(routes: Iterable[str]) -> dict[str, str]:
    """Route -> a name for its files and objects, unique within the plan: its base_name, plus a short hash of the
    exact route name where two routes share one (`Chat` and `chat`, `chat!` and `chat?`, long names cut alike) or
    none is left (a name in a non-Latin script). Raises InputError if two routes still end with one name."""
    routes = list(dict.fromkeys(routes))
    bases = {route: base_name(route) for route in routes}
    shared = Counter(bases.values())
    names = {}
    for route in routes:
        name = bases[route]
        if not name or shared[name] > 1:
            digest = hashlib.sha256(route.encode("utf-8")).hexdigest()[:HASH_CHARS]
            name = f"{(name or 'route')[:NAME_MAX - HASH_CHARS - 1].rstrip('-')}-{digest}"
        names[route] = name
    clashes = [n for n, count in Counter(names.values()).items() if count > 1]
    if clashes:
        raise InputError(f"routes {', '.join(repr(r) for r in routes if names[r] == clashes[0])} would be written "
                         f"under one name {clashes[0]!r}: rename one")
    return names


def _check_tp(target: Target, where: str) -> None:
    """Both engines shard attention heads over the TP group: a tp that does not divide a bundled model's
    heads would fail at the server's start, so it is refused here."""
    spec = bundled_model_specs().get(target.model)
    if spec is not None and (target.tp < 1 or spec.num_attention_heads % target.tp):
        raise InputError(f"{where}, column 'tp': {target.tp} does not divide {target.model}'s "
                         f"{spec.num_attention_heads} attention heads; the engines refuse such a TP size")


def _blank(value: object) -> bool:
    return value is None or value == ""


@dataclass(frozen=True)
class DeployFile:
    """One generated file: its name (no folders) and its text."""

    name: str
    text: str


def model_source(model: str) -> str:
    """The Hugging Face repo of a model slug, from its bundled config's source (fleetfacts/models/README.md)."""
    match = HUB_RE.search(bundled_model_sources().get(model, ""))
    if not match:
        raise InputError(f"model {model!r}: no Hugging Face repo among the bundled model configs; "
                         "pass --model-path (a hub id or a checkpoint dir)")
    return match.group(1)


def provenance(target: Target, settings: EngineSettings) -> list[str]:
    """The header lines every file carries: the plan row and the profile."""
    return [f"generated by `python -m planner deploy` from {target.plan_file}, line {target.line} "
            f"(route {target.route}: {target.engine} {target.engine_version} on {target.replicas} x "
            f"{target.tp} {target.gpu}, {target.precision}, up to {target.in_flight_p99:g} requests in "
            f"flight per replica at the planned load)",
            f"profile: {target.profile or 'not recorded in the plan'}",
            f"engine settings: {settings.source}",
            *router_lines(target),
            *host_tier_lines(target),
            "then check the running deployment against the plan: `python -m measure verify` (README: what was "
            "verified on hardware)"]


def router_lines(target: Target) -> list[str]:
    """What the plan assumed in front of an online route's replicas (its fleet was sized and judged behind it)."""
    if target.traffic != "online" or target.replicas < 2:
        return []
    lines = [f"router: the plan sized these {target.replicas} replicas behind a {target.router} load balancer "
             "(the plan's `router` column, else plan.assumptions.json `router`); its latency and SLO verdict hold "
             "for that router"]
    if target.router == "least-outstanding":
        lines.append("a plain Kubernetes Service (kube-proxy) or DNS spreads requests without looking at load: put "
                     "a least-request balancer in front (Envoy or Istio LEAST_REQUEST, the Gateway API inference "
                     "extension), or re-plan with router round-robin")
    if target.router == "prefix-affinity":
        lines.append("a prefix-cache-aware router must send each request to the replica caching its longest prefix "
                     "unless that replica is busier (llm-d's precise prefix-cache scorer, SGLang's cache_aware "
                     "router, Dynamo's KV router); the plan assumed it reads the replicas' caches exactly and yields "
                     "to the least-loaded replica beyond a load cap (planner.latency.simulate AFFINITY_LOAD_CAP): "
                     "set its thresholds to match")
    return lines


def host_tier_lines(target: Target) -> list[str]:
    """What the plan assumed of a host-memory KV tier behind each replica's prefix cache (none: no lines)."""
    if target.host_kv_gib <= 0:
        return []
    written = ("written below: --kv-offloading-backend native --kv-offloading-size" if target.engine == "vllm"
               else f"not written for {target.engine}: set its host KV cache of that size by hand")
    return [f"host KV tier: the plan sized this fleet with {target.host_kv_gib:g} GiB of host memory per replica "
            f"holding a copy of the prefix-cache blocks it computes (measured once, on an H100; {written}); each replica's "
            "node needs that much free host memory"]


def comment_safe(text: str) -> str:
    """`text` with every character that could end or disguise a comment line shown as an escape ('\\n')."""
    return COMMENT_UNSAFE.sub(lambda m: ascii(m.group())[1:-1], text)


def _comment(lines: list[str]) -> str:
    """'#' lines for a shell script or YAML file, each line's text escaped so it stays one comment line."""
    return "".join(f"# {comment_safe(line)}\n" for line in lines)


# ------------------------------------------------------------------ vLLM

def _batch_cap(target: Target, cap: int | None, flag: str, settings: EngineSettings) -> int | None:
    """The measured batch cap, checked against the operating point (None: the engine default was measured)."""
    needed = target.batch_needed
    if cap is not None and needed is not None and cap < needed:
        raise InputError(f"route {target.route}: the plan operates at {needed} sequences per replica but the "
                         f"profile ran with {flag} {cap} ({settings.source}); re-plan or re-measure")
    return cap


def vllm_args(target: Target, settings: EngineSettings, model_path: str) -> list[str]:
    """`vllm serve` argv (without the program) for one plan row."""
    args = dict(settings.args)
    if "dtype" not in args:
        if target.precision not in VLLM_DTYPE:
            raise InputError(f"route {target.route}: precision {target.precision!r} has no vLLM serving recipe "
                             f"here ({', '.join(VLLM_DTYPE)}); serve it with the engine args its profile recorded")
        args["dtype"] = VLLM_DTYPE[target.precision]
    if target.precision == "fp8":
        args.setdefault("quantization", "fp8")  # online FP8, as the profile measured it
    if target.prefix_cache:
        args = prefix_cache_args(args)
    if target.host_kv_gib > 0:  # vLLM's native CPU offloading of KV blocks (LMCache: --kv-offloading-backend lmcache)
        args.update(kv_offloading_backend="native", kv_offloading_size=f"{target.host_kv_gib:g}")
    argv = ["serve", model_path, "--served-model-name", target.model, "--port", str(PORT),
            "--tensor-parallel-size", str(target.tp), "--max-model-len", str(target.max_model_len)]
    seqs = _batch_cap(target, settings.max_num_seqs, "max_num_seqs", settings)
    for flag, value in (("--max-num-seqs", seqs), ("--max-num-batched-tokens", settings.max_num_batched_tokens)):
        if value is not None:
            argv += [flag, str(value)]
    for key, value in sorted(args.items()):
        argv += _flag(key, value)
    return argv


def prefix_cache_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """Engine args for a route the plan sized with prefix-cache hits: prefix caching on (vLLM's default: a profile's
    `enable_prefix_caching: false` is dropped, never written) and the served usage's cached-token count
    (`--enable-prompt-tokens-details`: usage.prompt_tokens_details.cached_tokens, what `measure verify` reads)."""
    kept = {k: v for k, v in args.items() if not (k == "enable_prefix_caching" and v is False)}
    return {**kept, "enable_prompt_tokens_details": True}


def _flag(key: str, value: Any) -> list[str]:
    flag = "--" + key.replace("_", "-")
    if value is True:
        return [flag]
    if value is False:
        return [f"--no-{key.replace('_', '-')}"]
    if isinstance(value, (dict, list)):
        return [flag, json.dumps(value, separators=(",", ":"))]
    return [flag, str(value)]


def vllm_files(target: Target, settings: EngineSettings, model_path: str) -> list[DeployFile]:
    command = shlex.join(["vllm", *vllm_args(target, settings, model_path)])
    text = "#!/usr/bin/env bash\n" + _comment(provenance(target, settings)) + f"exec {command}\n"
    return [DeployFile(f"{target.name}.vllm.sh", text)]


# ------------------------------------------------------------------ TensorRT-LLM

def trtllm_flow(version: str) -> str:
    """'llm-api' (1.x: trtllm-serve loads the checkpoint) or 'engine' (0.x: convert, build, then serve)."""
    try:
        parsed = Version(version)
    except InvalidVersion:
        raise InputError(f"engine_version {version!r}: not a TensorRT-LLM version (expected e.g. 0.14.0, 1.0)") \
            from None
    return "llm-api" if parsed.release >= TRTLLM_LLM_API_VERSION.release else "engine"


def trtllm_options(target: Target, settings: EngineSettings) -> dict[str, Any]:
    """The extra LLM-API options (YAML) for trtllm-serve: batch caps and KV cache as measured."""
    options: dict[str, Any] = {}
    batch = _batch_cap(target, settings.max_num_seqs, "max_batch_size", settings) or target.batch_needed
    if batch is not None:
        options["max_batch_size"] = batch
    if settings.max_num_batched_tokens is not None:
        options["max_num_tokens"] = settings.max_num_batched_tokens
    kv: dict[str, Any] = dict(settings.args.get("kv_cache_config") or {})
    if target.precision == "fp8":
        kv.setdefault("dtype", "fp8")
    if kv:
        options["kv_cache_config"] = kv
    return options


def trtllm_serve_args(target: Target, model_path: str, options_path: str, engine_dir: str | None) -> list[str]:
    """`trtllm-serve` argv (without the program)."""
    served = [engine_dir, "--tokenizer", model_path] if engine_dir else [model_path]
    backend = [] if engine_dir else ["--backend", "pytorch"]
    return [*served, *backend, "--port", str(PORT), "--tp_size", str(target.tp),
            "--max_seq_len", str(target.max_model_len), "--extra_llm_api_options", options_path]


def trtllm_build_commands(target: Target, options: Mapping[str, Any], model_path: str,
                          ckpt_dir: str, engine_dir: str) -> list[str]:
    """0.x engine flow: quantize (fp8) or convert the checkpoint, then trtllm-build with the plan's sizes."""
    if target.precision == "fp8":
        convert = ["python", "examples/quantization/quantize.py", "--model_dir", model_path, "--dtype", "bfloat16",
                   "--qformat", "fp8", "--kv_cache_dtype", "fp8", "--output_dir", ckpt_dir, "--tp_size", str(target.tp)]
    else:
        convert = ["python", "examples/llama/convert_checkpoint.py", "--model_dir", model_path, "--dtype",
                   VLLM_DTYPE.get(target.precision, "bfloat16"), "--output_dir", ckpt_dir, "--tp_size", str(target.tp)]
    build = ["trtllm-build", "--checkpoint_dir", ckpt_dir, "--output_dir", engine_dir,
             "--max_seq_len", str(target.max_model_len), "--max_input_len", str(target.max_model_len)]
    for key in ("max_batch_size", "max_num_tokens"):
        if key in options:
            build += [f"--{key}", str(options[key])]
    return [shlex.join(convert), shlex.join(build)]


def trtllm_files(target: Target, settings: EngineSettings, model_path: str) -> list[DeployFile]:
    options = trtllm_options(target, settings)
    options_name = f"{target.name}.trtllm-options.yaml"
    header = provenance(target, settings)
    lines = ["#!/usr/bin/env bash", "set -euo pipefail", _comment(header).rstrip("\n")]
    engine_dir = None
    if trtllm_flow(target.engine_version) == "engine":
        engine_dir = f"engines/{target.name}"
        lines.append(_comment([f"TensorRT-LLM {target.engine_version} (< {TRTLLM_LLM_API_VERSION}): convert and "
                               "build an engine (run from a TensorRT-LLM source checkout of that version), then "
                               "serve it"]).rstrip("\n"))
        lines += trtllm_build_commands(target, options, model_path, f"checkpoints/{target.name}", engine_dir)
    serve = shlex.join(["trtllm-serve", *trtllm_serve_args(target, model_path, options_name, engine_dir)])
    lines.append(f"exec {serve}")
    yaml_text = _comment(header) + yaml.safe_dump(options, sort_keys=True)
    return [DeployFile(f"{target.name}.trtllm.sh", "\n".join(lines) + "\n"), DeployFile(options_name, yaml_text)]


# ------------------------------------------------------------------ Kubernetes

def _annotations(target: Target, settings: EngineSettings) -> dict[str, str]:
    return {f"{ANNOTATION}plan": f"{target.plan_file}:{target.line}", f"{ANNOTATION}route": target.route,
            f"{ANNOTATION}router": target.router,
            f"{ANNOTATION}profile": target.profile or "not recorded", f"{ANNOTATION}engine-settings": settings.source}


def _container(target: Target, settings: EngineSettings, model_path: str, image: str) -> dict[str, Any]:
    if target.engine == "vllm":
        command, args = ["vllm"], vllm_args(target, settings, model_path)
    else:
        engine_dir = "/engines/model" if trtllm_flow(target.engine_version) == "engine" else None
        command = ["trtllm-serve"]
        args = trtllm_serve_args(target, model_path, "/etc/fleetplan/options.yaml", engine_dir)
    probe = {"httpGet": {"path": "/health", "port": PORT}, "periodSeconds": 10, "failureThreshold": 3}
    gpus = {"nvidia.com/gpu": str(target.tp)}
    return {"name": target.engine, "image": image, "command": command, "args": args,
            "ports": [{"name": "http", "containerPort": PORT}], "readinessProbe": probe,
            "resources": {"limits": gpus, "requests": gpus}, "volumeMounts": _mounts(target)}


def _mounts(target: Target) -> list[dict[str, Any]]:
    mounts = [{"name": "shm", "mountPath": "/dev/shm"}]  # NCCL between tensor-parallel ranks needs shared memory
    if target.engine == "trtllm":
        mounts += [{"name": "options", "mountPath": "/etc/fleetplan"}, {"name": "engines", "mountPath": "/engines"}]
    return mounts


def _volumes(target: Target) -> list[dict[str, Any]]:
    volumes: list[dict[str, Any]] = [{"name": "shm", "emptyDir": {"medium": "Memory"}}]
    if target.engine == "trtllm":
        volumes += [{"name": "options", "configMap": {"name": f"{target.name}-trtllm-options"}},
                    {"name": "engines", "emptyDir": {}}]
    return volumes


def _init_containers(target: Target, settings: EngineSettings, model_path: str, image: str) -> list[dict[str, Any]]:
    """TensorRT-LLM 0.x: build the engine into the pod's engines volume before the server starts."""
    if target.engine != "trtllm" or trtllm_flow(target.engine_version) != "engine":
        return []
    steps = trtllm_build_commands(target, trtllm_options(target, settings), model_path, "/engines/ckpt",
                                  "/engines/model")
    return [{"name": "build-engine", "image": image, "command": ["bash", "-c", " && ".join(steps)],
             "volumeMounts": _mounts(target), "resources": {"limits": {"nvidia.com/gpu": str(target.tp)}}}]


def k8s_objects(target: Target, settings: EngineSettings, model_path: str, image: str | None = None,
                min_replicas: int | None = None) -> list[dict[str, Any]]:
    """Deployment + Service (+ ConfigMap for trtllm options, + HPA when min_replicas < the plan's replicas)."""
    image = image or IMAGES[target.engine].format(version=target.engine_version)
    labels = {"app.kubernetes.io/name": target.name, "app.kubernetes.io/managed-by": "fleetplan"}
    meta = {"name": target.name, "labels": labels, "annotations": _annotations(target, settings)}
    pod = {"containers": [_container(target, settings, model_path, image)], "volumes": _volumes(target)}
    init = _init_containers(target, settings, model_path, image)
    if init:
        pod["initContainers"] = init
    objects: list[dict[str, Any]] = [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
         "spec": {"replicas": target.replicas, "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels}, "spec": pod}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": meta,
         "spec": {"selector": labels, "ports": [{"name": "http", "port": PORT, "targetPort": PORT}]}}]
    if target.engine == "trtllm":
        options = yaml.safe_dump(trtllm_options(target, settings), sort_keys=True)
        objects.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {**meta, "name": f"{target.name}"
                        "-trtllm-options"}, "data": {"options.yaml": options}})
    floor = autoscale_floor(target, min_replicas)
    if floor is not None:
        objects.append(_hpa(target, meta, floor))
    return objects


def autoscale_floor(target: Target, given: int | None = None) -> int | None:
    """The HPA's minReplicas: `given` (--min-replicas), else the plan's autoscaled floor; None (no HPA) for a
    batch route, or when it is not below the plan's replicas (the plan found that autoscaling cannot beat steady)."""
    floor = given if given is not None else target.autoscaled_floor
    if target.traffic != "online":
        return None
    return floor if floor is not None and floor < target.replicas else None


def no_hpa_reason(target: Target, given: int) -> str | None:
    """Why `deploy --format k8s --min-replicas given` writes no HPA for this route ("route (why)"); None when
    it writes one."""
    if target.traffic != "online":
        return f"{target.route} (batch: it runs its replicas until the job is done)"
    if given >= target.replicas:
        return f"{target.route} ({target.replicas} replica{'s' if target.replicas != 1 else ''}, not above the floor)"
    return None


def _hpa(target: Target, meta: dict[str, Any], min_replicas: int) -> dict[str, Any]:
    if target.batch_needed is None:
        raise InputError(f"route {target.route}: the plan gives no in_flight_p99 to autoscale on")
    metric = {"type": "Pods", "pods": {"metric": {"name": HPA_METRIC},
                                       "target": {"type": "AverageValue", "averageValue": str(target.batch_needed)}}}
    # Scale-down waits as long as the plan's simulated autoscaler waited (planner.sizing.autoscaled).
    behavior = {"scaleDown": {"stabilizationWindowSeconds": int(SCALE_DOWN_S)}}
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": meta,
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target.name},
                     "minReplicas": max(1, min_replicas), "maxReplicas": target.replicas, "metrics": [metric],
                     "behavior": behavior}}


class _PlainDumper(yaml.SafeDumper):
    """Writes repeated objects (labels) out in full: no YAML anchors, which some manifest tools reject."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def k8s_files(target: Target, settings: EngineSettings, model_path: str, image: str | None = None,
              min_replicas: int | None = None) -> list[DeployFile]:
    objects = k8s_objects(target, settings, model_path, image, min_replicas)
    text = _comment(provenance(target, settings)) + yaml.dump_all(objects, Dumper=_PlainDumper, sort_keys=False)
    return [DeployFile(f"{target.name}.k8s.yaml", text)]


def deployment_files(fmt: str, target: Target, settings: EngineSettings, model_path: str | None = None,
                     image: str | None = None, min_replicas: int | None = None) -> list[DeployFile]:
    """The files of one format for one plan row; raises InputError for a format the engine has none of."""
    model_path = model_path or model_source(target.model)
    if fmt == "k8s":
        if target.engine not in IMAGES:
            raise InputError(f"route {target.route}: no Kubernetes template for engine {target.engine!r}")
        return k8s_files(target, settings, model_path, image, min_replicas)
    if fmt != target.engine:
        raise InputError(f"route {target.route}: the plan chose {target.engine}, not {fmt}; use --format "
                         f"{target.engine if target.engine in FORMATS else 'k8s'}")
    return vllm_files(target, settings, model_path) if fmt == "vllm" else trtllm_files(target, settings, model_path)
