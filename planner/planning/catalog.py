"""The catalog a plan chooses from: fitted curves (measured, published, transferred), prices and engine-operations
costs (load_inputs), and per route the candidate curves its allow-lists admit (candidate_curves)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
from packaging.version import InvalidVersion, Version

from fleetfacts.errors import InputError
from fleetfacts.schema import (
    DEFAULT_CONFIG,
    ENGINE_OPS,
    PRICES,
    PROFILE_GROUP,
    Schema,
    load_table,
)
from fleetfacts.specs import gpu_spec, model_facts
from planner.engine.curves import Curve, GroupKey, leave_one_out, load_profiles
from planner.engine.physics_prior import physics_priors
from planner.engine.transfer import Transfer
from planner.engine.transfer_check import TRANSFER_MODES, transfer_for, transferred_candidates
from planner.latency import serving_curves
from planner.sizing import costs
from planner.sizing.options import option_label
from planner.traffic.routes import ALLOW_LISTS, Route

log = logging.getLogger(__name__)

DATA_DIR = Path(__file__).resolve().parents[1] / "data"  # planner/data


BUNDLED_PRICES = DATA_DIR / "prices.csv"


BUNDLED_OPS = DATA_DIR / "engine_ops.csv"


@dataclass(frozen=True, eq=False)
class Catalog:
    """What the planner chooses from and prices with: fitted curves, prices, engine-ops costs (load once).

    curves: of every profiled model, or of the models load_inputs was asked for (a plan's routes' models).
    profiles_df: every profile row (the curves were fitted to those of their models; the transfer to all).
    loo_error: cache of group_loo_error (per model:option, the group's worst leave-one-out error).
    transfer_mode: which routes get transferred options (planner.engine.transfer_check.TRANSFER_MODES).
    """

    curves: dict[GroupKey, Curve]
    prices_df: pd.DataFrame
    ops_df: pd.DataFrame
    profiles_df: pd.DataFrame
    loo_error: dict[str, float] = dataclasses.field(default_factory=dict)
    transfer_mode: str = "auto"

    @cached_property
    def transfer(self) -> Transfer:
        """The transfer calibrated on these profiles (built on first use: a few seconds)."""
        return transfer_for(self.profiles_df)

    @cached_property
    def price_book(self) -> costs.PriceBook:
        return costs.PriceBook(self.prices_df)

    @cached_property
    def ops_book(self) -> costs.OpsBook:
        return costs.OpsBook(self.ops_df)


def load_inputs(profiles_dir: str | Path | None = None, prices: str | Path | pd.DataFrame | None = None,
                ops: str | Path | pd.DataFrame | None = None, transfer: str = "auto",
                models: Iterable[str] | None = None) -> Catalog:
    """Load and fit profiles, and load prices and engine-ops tables (None = the bundled files).

    `prices` / `ops` may be a path or an already validated DataFrame; `transfer` one of TRANSFER_MODES.
    `models`: fit only these models' curves (a plan of routes needs its routes' models; each curve is the
    one a catalog of every model holds); None = every model.  Raises InputError.
    """
    if transfer not in TRANSFER_MODES:
        raise InputError(f"transfer mode {transfer!r}: expected one of {', '.join(TRANSFER_MODES)}")
    # The small tables first: a bad prices or ops file is refused before seconds of curve fitting.
    prices_df, ops_df = _table(prices, BUNDLED_PRICES, PRICES), _table(ops, BUNDLED_OPS, ENGINE_OPS)
    profiles = load_profiles(profiles_dir)
    curves = serving_curves(profiles, models)
    log.info("fitted %d curves from %d profile rows", len(curves), len(profiles))
    return Catalog(curves, prices_df, ops_df, profiles, transfer_mode=transfer)


def group_loo_error(catalog: Catalog, key: GroupKey) -> float:
    """The group's worst leave-one-out throughput error as a fraction (as `validate` reports it; 0 when the
    group has too few points to leave one out).  Computed on first use and kept in catalog.loo_error,
    which a dataclasses.replace'd catalog shares."""
    name = f"{key.model}:{option_label(key)}"
    if name not in catalog.loo_error:
        profiles = catalog.profiles_df
        rows = profiles[np.logical_and.reduce([profiles[c].astype(str) == str(v) for c, v in _group_values(key)])] \
            if not profiles.empty else profiles
        table = leave_one_out(rows, physics_priors(profiles)) if not rows.empty else pd.DataFrame()
        catalog.loo_error[name] = float(table["max_err_pct"].max()) / 100 if not table.empty else 0.0
    return catalog.loo_error[name]


def _group_values(key: GroupKey) -> list[tuple[str, object]]:
    return [(c, getattr(key, c)) for c in PROFILE_GROUP]


def _table(value: str | Path | pd.DataFrame | None, bundled: Path, schema: Schema) -> pd.DataFrame:
    if isinstance(value, pd.DataFrame):
        return value
    path = Path(value) if value is not None else bundled
    if value is None and not path.exists():
        raise InputError(f"{path}: bundled {schema.name} table is missing from this checkout")
    return load_table(path, schema)


def is_prerelease(version: str) -> bool:
    """A pre-release, development or locally built engine version (1.0rc1, 0.21.dev3, 0.20+main);
    an unparseable version counts as one (nobody can say what it is)."""
    try:
        parsed = Version(str(version))
    except InvalidVersion:
        return True
    return parsed.is_prerelease or parsed.is_devrelease or parsed.local is not None


def candidate_curves(route: Route, catalog: Catalog, allow_prerelease: bool = True) -> tuple[list[Curve], list[str]]:
    """The fitted curves of the route's model that its allow-lists admit, and the labels of those held
    back because their engine build is a pre-release (unless `allow_prerelease`)."""
    curves = _allowed_curves(route, catalog)
    if allow_prerelease:
        return curves, []
    # A transferred curve's version carries a local '+transfer' tag: that marks how it was made, not a dev build.
    held = [c for c in curves if is_prerelease(c.key.engine_version) and c.source_provenance != "transferred"]
    return [c for c in curves if c not in held], sorted({f"{c.key.engine} {c.key.engine_version}" for c in held})


def _allowed_curves(route: Route, catalog: Catalog) -> list[Curve]:
    """The fitted curves of the route's model its allow-lists admit, then the transferred ones."""
    allowed = {name: route.allowed(name) for name in ALLOW_LISTS}
    configs = allowed["configs"]
    fitted = [curve for key, curve in catalog.curves.items()
              if key.model == route.model and _admits(allowed, key.engine, key.gpu, key.precision, key.tp)
              and (not configs or (key.config or DEFAULT_CONFIG).lower() in configs)]
    return fitted + _transferred(route, catalog, allowed)


def _admits(allowed: dict[str, list[str]], engine: str, gpu: str, precision: str, tp: int) -> bool:
    """Whether the allow-lists (an empty one admits all) admit this engine, GPU, precision and TP."""
    return all(not allowed[name] or value in allowed[name] for name, value in
               (("engines", engine), ("gpus", gpu), ("precisions", precision), ("tps", str(tp))))


def _transferred(route: Route, catalog: Catalog, allowed: dict[str, list[str]]) -> list[Curve]:
    """Transferred curves (planner.engine.transfer) for options no fitted curve covers, per catalog.transfer_mode."""
    profiled = any(k.model == route.model for k in catalog.curves)
    if catalog.transfer_mode == "off" or (catalog.transfer_mode == "auto" and profiled):
        return []
    model = model_facts(route.model)
    if model is None or (allowed["configs"] and DEFAULT_CONFIG not in allowed["configs"]):
        return []
    covered = {(k.engine, k.gpu, k.precision, k.tp) for k in catalog.curves if k.model == route.model}
    gpus = [spec for gpu in sorted(set(catalog.prices_df["gpu"])) if (spec := gpu_spec(gpu)) is not None]

    def admits(engine: str, gpu: str, precision: str, tp: int) -> bool:
        return (engine, gpu, precision, tp) not in covered and _admits(allowed, engine, gpu, precision, tp)
    return transferred_candidates(catalog.transfer, model, gpus, admits)
