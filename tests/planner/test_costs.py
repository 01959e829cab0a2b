"""Cost arithmetic, price and engine-ops lookups, break-even."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetfacts.schema import ENGINE_OPS, PRICES, validate_frame
from planner.sizing import costs
from planner.sizing.costs import CostLookupError, EngineOps, OpsBook, PriceBook


def prices() -> pd.DataFrame:
    rows = [("h100", "a", "on-demand", 3.0), ("h100", "b", "on-demand", 2.5), ("h100", "b", "spot", 1.2),
            ("h200", "a", "on-demand", 4.0)]
    frame = pd.DataFrame([dict(gpu=g, provider=p, pricing_type=t, usd_per_gpu_hour=str(u), source="test",
                               date="2026-12-02") for g, p, t, u in rows])
    return validate_frame(frame, PRICES, "prices")


def ops() -> pd.DataFrame:
    rows = [("vllm", "", 1, 0, 0), ("trtllm", "<0.19", 8, 2, 120), ("trtllm", ">=0.19", 3, 0.5, 60)]
    frame = pd.DataFrame([dict(engine=e, versions=v, flow="f", engineer_hours_per_update=str(h),
                               build_gpu_hours_per_update=str(b), adoption_hours=str(a), source="assumption: test")
                          for e, v, h, b, a in rows])
    return validate_frame(frame, ENGINE_OPS, "ops")


def test_cheapest_provider_when_none_given():
    price = costs.find_price(prices(), "h100")
    assert (price.provider, price.usd_per_gpu_hour) == ("b", 2.5)
    assert costs.find_price(prices(), "h100", provider="a").usd_per_gpu_hour == 3.0
    assert costs.find_price(prices(), "h100", pricing_type="spot").usd_per_gpu_hour == 1.2


def test_unknown_gpu_has_no_price_and_a_reason():
    assert costs.find_price(prices(), "b200") is None
    assert PriceBook(prices()).find("b200") is None
    assert costs.no_price_reason("b200", None, "on-demand") == "no price for gpu b200 (on-demand)"


def test_price_book_agrees_with_find_price():
    book = PriceBook(prices())
    for gpu in ("h100", "h200"):
        for provider in (None, "a", "b"):
            for kind in ("on-demand", "spot"):
                assert book.find(gpu, provider, kind) == costs.find_price(prices(), gpu, provider, kind)


@pytest.mark.parametrize("version,hours", [("0.17.0", 8), ("0.19.0", 3), ("1.0.0", 3), ("1.1.0rc2", 3),
                                           ("0.19.0rc1", 3)])
def test_engine_ops_by_pep440_specifier(version, hours):
    assert costs.find_engine_ops(ops(), "trtllm", version).engineer_hours_per_update == hours


def test_bundled_engine_ops_cover_released_and_prerelease_versions():
    from fleetfacts.schema import load_table
    from planner.planning.catalog import BUNDLED_OPS

    if not BUNDLED_OPS.exists():
        pytest.skip("bundled engine_ops.csv not in this checkout")
    bundled = load_table(BUNDLED_OPS, ENGINE_OPS)
    for engine, version in [("vllm", "0.26.0"), ("trtllm", "0.17.0"), ("trtllm", "1.0.0"), ("trtllm", "1.2.0rc1")]:
        assert costs.find_engine_ops(bundled, engine, version).engine == engine


def test_empty_specifier_matches_every_version():
    assert costs.find_engine_ops(ops(), "vllm", "0.26.0").engineer_hours_per_update == 1


def test_missing_engine_ops_row_is_a_clear_error():
    with pytest.raises(CostLookupError, match="no engine-ops row for sglang 0.4"):
        costs.find_engine_ops(ops(), "sglang", "0.4")
    with pytest.raises(CostLookupError):
        OpsBook(ops()).find("sglang", "0.4")


def test_gpu_cost_arithmetic():
    assert costs.gpu_usd_per_month(8, 2.5, 730.0) == pytest.approx(14600.0)
    assert costs.batch_gpu_hours_per_month(3, 2, 1.2, 30, 1.0) == pytest.approx(3 * 2 * 2.0 * 30)
    assert costs.batch_gpu_hours_per_month(3, 2, 1.2, 30, 0.0) == pytest.approx(3 * 2 * 1.2 * 30)
    assert costs.billed_hours(2.0, 1.0) == 2.0


OPS = EngineOps("trtllm", ">=0.19", engineer_hours_per_update=3.0, build_gpu_hours_per_update=0.5,
                adoption_hours=60.0, source="assumption: test")


def test_engineering_cost_formula():
    eng = costs.engineering_cost(4, OPS, engineer_usd_per_hour=150.0, usd_per_gpu_hour=2.0,
                                 adoption_amortise_months=12.0)
    assert eng.usd_per_update == pytest.approx(3 * 150 + 0.5 * 2)
    assert eng.update_usd_per_month == pytest.approx(4 * 451)
    assert eng.adoption_usd_per_month == pytest.approx(60 * 150 / 12)
    assert eng.total == pytest.approx(4 * 451 + 750)


def test_zero_updates_means_zero_update_cost():
    eng = costs.engineering_cost(0, OPS, 150.0, 2.0, 12.0)
    assert eng.update_usd_per_month == 0.0
    assert eng.adoption_usd_per_month > 0  # adoption is separate
    assert costs.engineering_cost(0, OPS, 150.0, 2.0, 0.0).total == 0.0  # amortisation off


@given(price=st.floats(0.1, 50), bump=st.floats(0.0, 10), gpus=st.integers(0, 512), updates=st.floats(0, 30))
def test_a_higher_price_never_gives_a_lower_cost(price, bump, gpus, updates):
    assert costs.gpu_usd_per_month(gpus, price + bump, 730) >= costs.gpu_usd_per_month(gpus, price, 730)
    low = costs.engineering_cost(updates, OPS, 100, price, 12).total
    assert costs.engineering_cost(updates, OPS, 100, price + bump, 12).total >= low


def test_breakeven_arithmetic():
    # A = 1000 + 500u, B = 3000 + 100u: equal at u = 2000 / 400 = 5
    assert costs.breakeven_updates(1000, 500, 3000, 100) == pytest.approx(5.0)
    assert costs.breakeven_updates(1000, 100, 3000, 100) is None        # parallel: never
    assert costs.breakeven_updates(1000, 100, 3000, 500) is None        # A cheaper at every u >= 0
    assert costs.breakeven_updates(1000, 100, 1000, 500) is None        # u* = 0


@given(ga=st.floats(0, 1e5), ea=st.floats(0, 1e4), gb=st.floats(0, 1e5), eb=st.floats(0, 1e4))
def test_breakeven_is_where_totals_meet(ga, ea, gb, eb):
    u = costs.breakeven_updates(ga, ea, gb, eb)
    if u is not None:
        assert ga + ea * u == pytest.approx(gb + eb * u, rel=1e-6, abs=1e-6)


def test_monthly_total_vs_updates_is_the_option_line():
    row = pd.Series({"fixed_usd_per_month": 1000.0, "usd_per_update": 250.0})
    np.testing.assert_allclose(costs.monthly_total_vs_updates(row, [0, 1, 4]), [1000, 1250, 2000])
