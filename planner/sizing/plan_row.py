"""One typed plan row: a route's recommendation (or why it has none), from its sizing to the exports.

`PlanRow` has exactly the columns of fleetfacts.schema.PLAN, in the schema's order, as typed fields:
text as str ('' = blank), whole numbers as int (None = blank), numbers as float (NaN = blank).  A row is
checked against the schema when it is made (InputError naming the route and the column).

- `PlanRow.recommending(option)`: the row of a route's chosen Option (status ok); the plan adds its
  runner-up, ranges, simulation check and deployment columns with `dataclasses.replace`;
  `PlanRow.infeasible(...)`: the row of a route with no feasible option;
- `plan_frame(rows)`: the one conversion to the PLAN DataFrame (typed, the schema's column order);
  `plan_frame(rows, rounded=True)`: as the plan files show it (PLAN_DECIMALS);
- `plan_rows(frame)`: the way back, for a plan read from a file.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import astuple, dataclass, fields
from typing import Any

import numpy as np
import pandas as pd

from fleetfacts.errors import InputError
from fleetfacts.schema import PLAN, typed_cell, validate_frame
from planner.engine.curves import CurveLike
from planner.latency import idle_ttft_infeasible
from planner.sizing.options import LATENCY_INTERVAL_COLUMNS, Option, option_name
from planner.sizing.sizing import Sizing

NAN = math.nan


@dataclass(frozen=True)
class PlanRow:
    """One row of a plan (schema PLAN; see its column docs for each field's meaning and unit)."""

    route: str
    status: str
    traffic: str = ""
    model: str = ""
    engine: str = ""
    engine_version: str = ""
    engine_config: str = ""
    gpu: str = ""
    precision: str = ""
    tp: int | None = None
    replicas: int | None = None
    gpus: int | None = None
    gpus_low: int | None = None
    gpus_high: int | None = None
    in_flight_p99: float = NAN
    replica_output_tok_per_s: float = NAN
    replica_output_tok_per_s_low: float = NAN
    replica_output_tok_per_s_high: float = NAN
    ttft_pred_ms: float = NAN
    ttft_pred_ms_low: float = NAN
    ttft_pred_ms_high: float = NAN
    tpot_pred_ms: float = NAN
    tpot_pred_ms_low: float = NAN
    tpot_pred_ms_high: float = NAN
    e2e_pred_ms: float = NAN
    e2e_pred_ms_low: float = NAN
    e2e_pred_ms_high: float = NAN
    latency_tier: str = ""
    utilisation: float = NAN
    gpu_usd_per_month: float = NAN
    eng_usd_per_month: float = NAN
    total_usd_per_month: float = NAN
    total_usd_per_month_low: float = NAN
    total_usd_per_month_high: float = NAN
    usd_per_1m_output_tok: float = NAN
    runner_up: str = ""
    runner_up_total_usd_per_month: float = NAN
    savings_usd_per_month: float = NAN
    breakeven_updates_per_month: float = NAN
    breakeven_note: str = ""
    sim_attainment: float = NAN
    sim_replicas: int | None = None
    ttft_worst_window_ms: float = NAN
    tpot_worst_window_ms: float = NAN
    windows: int | None = None
    windows_in_breach: int | None = None
    busiest_window_start_s: float = NAN
    slo_attainment: float = NAN
    whole_log_replicas: int | None = None
    whole_log_usd_per_month: float = NAN
    whole_log_windows_in_breach: int | None = None
    autoscaled_floor: int | None = None
    autoscaled_usd_per_month: float = NAN
    autoscaled_windows_in_breach: int | None = None
    load_bursts: str = ""
    resampled_hours: int | None = None
    holds_in_resampled_hours: int | None = None
    router: str = ""
    prefix_hit_rate_pred: float = NAN
    host_kv_gib: float = NAN
    ttft_idle_infeasible: int | None = None
    ttft_idle_infeasible_share: float = NAN
    ttft_idle_infeasible_longest_prompt: int | None = None
    max_model_len: int | None = None
    profile: str = ""
    provenance: str = ""
    latency_basis: str = ""
    price_source: str = ""
    notes: str = ""

    def __post_init__(self) -> None:
        """Every field as its PLAN column types it (numpy scalars to Python, slugs lower-cased, bounds checked)."""
        for column in PLAN.columns:
            value = getattr(self, column.name)
            try:
                typed = typed_cell(value, column)
            except ValueError as err:
                raise InputError(f"plan, route {self.route!r}, column {column.name!r}: {err}") from None
            if column.kind == "int" and isinstance(typed, float):  # blank
                typed = None
            object.__setattr__(self, column.name, typed)

    @classmethod
    def recommending(cls, option: Option) -> PlanRow:
        """The row recommending `option` for its route (status ok): its engine build, size, throughput,
        latency, cost, basis and notes; the plan's own columns (runner-up, ranges, ...) blank."""
        route = option.route
        return cls(route=route.name, status="ok", traffic=route.traffic, model=route.model, **option.shared_columns(),
                   sim_attainment=option.sim_attainment, sim_replicas=_whole(option.sim_replicas),
                   prefix_hit_rate_pred=option.prefix_hit_rate,
                   **window_columns(option.sizing), **whole_log_columns(option))

    @classmethod
    def infeasible(cls, route: str, traffic: str, model: str, reason: str) -> PlanRow:
        """The row of a route no option serves, with the reason in its notes."""
        return cls(route=route, status="infeasible", traffic=traffic, model=model, notes=reason)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def window_verdict(self) -> str:
        """One line on the planned fleet's SLO windows (fleetfacts.slo), '' when it was not judged per window."""
        if self.windows is None or self.windows_in_breach is None:
            return ""
        head = (f"holds every SLO window of its load ({self.windows} of {self.windows})" if not self.windows_in_breach
                else f"{self.windows_in_breach} of {self.windows} SLO windows break the SLO")
        text = (f"{head}: worst window TTFT {self.ttft_worst_window_ms:.0f} ms, TPOT {self.tpot_worst_window_ms:.1f} "
                f"ms; busiest window from {self.busiest_window_start_s:.0f} s; {self.slo_attainment:.1%} of requests "
                "within every target")
        if self.whole_log_replicas is not None and self.whole_log_replicas != self.replicas:
            text += (f". Sized on the whole-log percentile instead: {self.whole_log_replicas} replicas, "
                     f"${self.whole_log_usd_per_month:,.0f}/month, {self.whole_log_windows_in_breach} of "
                     f"{self.windows} windows in breach")
        if self.autoscaled_floor is not None and self.autoscaled_floor == self.replicas:
            text += ". Autoscaling cannot beat steady (scale_up_s in the assumptions; the notes say why)"
        elif self.autoscaled_floor is not None:
            text += (f". Autoscaled from a floor of {self.autoscaled_floor} to {self.replicas} replicas: "
                     f"${self.autoscaled_usd_per_month:,.0f}/month, {self.autoscaled_windows_in_breach} of "
                     f"{self.windows} windows in breach")
        if self.resampled_hours:
            text += (f". Holds every window in {self.holds_in_resampled_hours} of {self.resampled_hours} hours "
                     "drawn at random from the load's windows")
        if self.load_bursts:
            text += f". The load: {self.load_bursts}"
        if not math.isnan(self.prefix_hit_rate_pred):
            text += (f". Prefix cache: {self.prefix_hit_rate_pred:.1%} of prompt tokens found cached behind "
                     f"{self.router} (the rest prefilled)")
        return text + self.idle_infeasible_sentence()

    def idle_infeasible_sentence(self) -> str:
        """". N requests (x%) have prompts whose prefill alone ..." when any request of the load is TTFT-infeasible
        on an idle replica (planner.latency.idle), else ''."""
        if not self.ttft_idle_infeasible:
            return ""
        return (f". {self.ttft_idle_infeasible} requests ({self.ttft_idle_infeasible_share:.2%}) have prompts whose "
                "prefill alone exceeds the TTFT target on an idle replica (longest: "
                f"{self.ttft_idle_infeasible_longest_prompt:,} tokens); they are judged on every target but TTFT")

    @property
    def option(self) -> str:
        """The recommended option's name (engine/version/gpu/precision/tpN[/config]); '' when infeasible."""
        if not self.ok or self.tp is None:
            return ""
        return option_name(self.engine, self.engine_version, self.gpu, self.precision, self.tp, self.engine_config)


def window_columns(s: Sizing) -> dict[str, Any]:
    """The per-window verdict columns of a sizing judged on its fleet (blank when it was not)."""
    c = s.check
    if c is None:
        return {}
    return {"ttft_worst_window_ms": c.worst_ttft_ms, "tpot_worst_window_ms": c.worst_tpot_ms, "windows": c.windows,
            "windows_in_breach": c.windows_in_breach, "busiest_window_start_s": c.busiest_window_start_s,
            "slo_attainment": c.attainment}


def idle_infeasible_columns(curve: CurveLike, input_len: np.ndarray, ttft_ms: float | None) -> dict[str, Any]:
    """The columns counting the load's requests (prompt tokens `input_len`) that cannot meet the TTFT target even
    alone on an idle replica of `curve` (planner.latency.idle); blank without a TTFT target or requests."""
    prompts = np.asarray(input_len)
    if ttft_ms is None or not prompts.size:
        return {}
    out = prompts[idle_ttft_infeasible(curve, prompts, ttft_ms)]
    return {"ttft_idle_infeasible": int(out.size), "ttft_idle_infeasible_share": out.size / prompts.size,
            "ttft_idle_infeasible_longest_prompt": int(out.max()) if out.size else None}


def whole_log_columns(option: Option) -> dict[str, Any]:
    """The whole-log alternative's columns (blank when the option was not judged on its fleet)."""
    w = option.whole_log
    if w is None:
        return {}
    return {"whole_log_replicas": w.replicas, "whole_log_usd_per_month": w.usd_per_month,
            "whole_log_windows_in_breach": w.windows_in_breach}


def _whole(value: float) -> int | None:
    """A count held as a float (NaN = none, as Option's simulation columns) as an int or None."""
    return None if math.isnan(value) else int(value)


# Rounding of plan files (issue 15): tokens/s to whole tokens, dollars to cents, milliseconds to 0.1 ms;
# finer digits are noise next to the intervals and make a capacity review's spreadsheet unreadable.
PLAN_DECIMALS = {
    **dict.fromkeys(("replica_output_tok_per_s", "replica_output_tok_per_s_low", "replica_output_tok_per_s_high"), 0),
    **dict.fromkeys(("gpu_usd_per_month", "eng_usd_per_month", "total_usd_per_month", "total_usd_per_month_low",
                     "total_usd_per_month_high", "usd_per_1m_output_tok", "runner_up_total_usd_per_month",
                     "savings_usd_per_month"), 2),
    **dict.fromkeys(("ttft_pred_ms", "tpot_pred_ms", "e2e_pred_ms", "in_flight_p99",
                     *LATENCY_INTERVAL_COLUMNS), 1),
    "utilisation": 3, "sim_attainment": 4, "breakeven_updates_per_month": 2,
    "ttft_worst_window_ms": 1, "tpot_worst_window_ms": 1, "busiest_window_start_s": 0, "slo_attainment": 4,
    "ttft_idle_infeasible_share": 4,
    "whole_log_usd_per_month": 2, "autoscaled_usd_per_month": 2, "prefix_hit_rate_pred": 4, "host_kv_gib": 3,
}


def plan_frame(rows: Iterable[PlanRow], rounded: bool = False) -> pd.DataFrame:
    """The rows as a PLAN DataFrame: the schema's columns in its order, typed as validate_frame types them
    (numbers float64, whole numbers Int64, text object); `rounded`: as plan files show them (PLAN_DECIMALS)."""
    frame = validate_frame(pd.DataFrame([astuple(r) for r in rows], columns=PLAN.names), PLAN, "plan")
    return rounded_plan(frame) if rounded else frame


def rounded_plan(plan: pd.DataFrame) -> pd.DataFrame:
    """A PLAN frame as files show it (PLAN_DECIMALS); integer columns as whole numbers."""
    out = plan.reindex(columns=PLAN.names).copy()
    for column, digits in PLAN_DECIMALS.items():
        out[column] = pd.to_numeric(out[column], errors="coerce").round(digits)
        if digits == 0:
            out[column] = out[column].astype("Int64")
    for column in (c.name for c in PLAN.columns if c.kind == "int"):
        out[column] = pd.to_numeric(out[column], errors="coerce").round().astype("Int64")
    return out


def plan_rows(frame: pd.DataFrame) -> tuple[PlanRow, ...]:
    """The rows of a validated PLAN frame (fleetfacts.schema.validate_frame, read_plan) as PlanRows."""
    names = [f.name for f in fields(PlanRow)]
    return tuple(PlanRow(*(_scalar(v) for v in values))
                 for values in frame.reindex(columns=names).itertuples(index=False, name=None))


def _scalar(value: Any) -> Any:
    """A frame cell as a plain Python value (pandas' NA and None as None)."""
    if value is None or value is pd.NA:
        return None
    return value.item() if hasattr(value, "item") else value
