"""ui.scenario: scenario files and query strings round-trip; bad input names the row."""

from __future__ import annotations

import pandas as pd
import pytest

from fleetfacts.errors import InputError
from fleetfacts.schema import PRICES, ROUTES, validate_frame
from ui.scenario import (
    Scenario,
    Settings,
    apply_settings,
    compare_plans,
    drop_unknown,
    read_csv_upload,
    scale_prices,
    scenario_from_json,
    scenario_to_json,
    settings_from_query,
    settings_to_query,
    validate_table,
)

ROUTES_CSV = b"""name,model,traffic,rate_rps,num_requests,deadline_hours,input_len_mean,output_len_mean,ttft_slo_ms,tpot_slo_ms,engines
chat,llama-3.1-8b,online,12.5,,,800,250,1000,50,
nightly,llama-3.1-8b,batch,,10001,6,2000,400,,,vllm;trtllm
"""


def routes() -> pd.DataFrame:
    return read_csv_upload(ROUTES_CSV, ROUTES, "routes.csv")


def test_upload_reads_and_types_routes():
    frame = routes()
    assert list(frame["name"]) == ["chat", "nightly"]
    assert frame["rate_rps"].iloc[0] == 12.5
    assert frame["num_requests"].iloc[1] == 10001
    assert frame["peak_to_mean"].tolist() == [1.0, 1.0]  # schema default


def test_upload_skips_comment_lines_and_bom():
    data = "\ufeff# fleetplan-assumptions: {}\n".encode() + ROUTES_CSV
    assert len(read_csv_upload(data, ROUTES, "r.csv")) == 2


@pytest.mark.parametrize(
    "data, fragment",
    [
        (b"", "empty"),
        (b"\xff\xfe\x00bin", "UTF-8"),
        (b"name,model\nchat,llama-3.1-8b\n", "missing required column(s) traffic"),
        (ROUTES_CSV.replace(b"12.5", b"-3"), "line 2, column 'rate_rps': expected a value > 0"),
        (b"a,b\n1,2,3,4\n\"x", "routes.csv"),
    ],
)
def test_bad_upload_says_what_to_fix(data, fragment):
    with pytest.raises(InputError, match=None) as info:
        read_csv_upload(data, ROUTES, "routes.csv")
    assert fragment in str(info.value)
    assert str(info.value).startswith("routes.csv")


def test_edited_table_error_names_row_and_route():
    frame = routes()
    frame.loc[1, "deadline_hours"] = -1.0
    with pytest.raises(InputError) as info:
        validate_table(frame, ROUTES, "routes table")
    message = str(info.value)
    assert "routes table, row 2 (route 'nightly'), column 'deadline_hours'" in message
    assert ", line " not in message


def test_edited_table_drops_empty_rows_and_accepts_pd_na():
    frame = routes()
    frame.loc[2] = [None] * len(frame.columns)
    checked = validate_table(frame, ROUTES, "routes table")
    assert len(checked) == 2
    assert pd.isna(checked["num_requests"].iloc[0])


def test_apply_settings_scales_load_and_narrows_allow_lists():
    settings = Settings(traffic_growth=2.0, engines=("vllm",))
    out = apply_settings(routes(), settings)
    assert out["rate_rps"].iloc[0] == 25.0
    assert out["num_requests"].iloc[1] == 20002
    assert out["engines"].tolist() == ["vllm", "vllm"]


def test_apply_settings_narrows_the_engine_settings_too():
    frame = routes()
    frame.loc[1, "configs"] = "tuned;default"
    out = apply_settings(frame, Settings(configs=("default",)))
    assert out["configs"].tolist() == ["default", "default"]
    back, warnings = settings_from_query(settings_to_query(Settings(configs=("default",))))
    assert back.configs == ("default",) and warnings == []


def test_apply_settings_refuses_an_empty_allow_list():
    frame = routes()
    frame.loc[1, "engines"] = "trtllm"
    with pytest.raises(InputError, match="route 'nightly'.*nothing in common"):
        apply_settings(frame, Settings(engines=("vllm",)))


def test_scale_prices_multiplies_and_labels():
    prices = validate_frame(pd.DataFrame([{"gpu": "h100", "provider": "x", "pricing_type": "spot",
                                           "usd_per_gpu_hour": "2", "source": "s", "date": "d"}]), PRICES)
    out = scale_prices(prices, 1.5)
    assert out["usd_per_gpu_hour"].iloc[0] == 3.0
    assert "what-if: x1.5" in out["notes"].iloc[0]
    assert prices["usd_per_gpu_hour"].iloc[0] == 2.0


def test_query_string_round_trip():
    settings = Settings(provider="lambda", pricing_type="reserved", engineer_usd_per_hour=120.0,
                        engines=("vllm", "trtllm"), traffic_growth=1.5, gpu_price_factor=0.8)
    query = settings_to_query(settings)
    assert query["engines"] == "vllm,trtllm" and query["growth"] == "1.5"
    assert "gpus" not in query  # defaults stay out of the link
    back, warnings = settings_from_query(query)
    assert back == settings and warnings == []


def test_query_string_bad_values_are_skipped_with_a_warning():
    back, warnings = settings_from_query({"growth": "lots", "pricing": "free", "gpu_price_x": "2"})
    assert back == Settings(gpu_price_factor=2.0)
    assert len(warnings) == 2
    assert any("growth='lots'" in w and "expected a number" in w for w in warnings)


def test_scenario_file_round_trip():
    scenario = Scenario("peak season", routes(), Settings(gpus=("h100", "h200"), traffic_growth=3.0))
    back = scenario_from_json(scenario_to_json(scenario))
    assert back.name == "peak season" and back.settings == scenario.settings
    assert back.prices is None and back.ops is None
    pd.testing.assert_frame_equal(back.routes, scenario.routes)


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("{nope", "invalid JSON"),
        ('{"format": "other"}', "not a Fleetplan scenario"),
        ('{"format": "fleetplan-scenario", "version": 99}', "version 99"),
        ('{"format": "fleetplan-scenario", "version": 1, "routes": [{"name": "a"}]}', "missing required"),
        ('{"format": "fleetplan-scenario", "version": 1, "routes": [], "settings": {"colour": 1}}',
         "unknown setting"),
    ],
)
def test_bad_scenario_file(text, fragment):
    with pytest.raises(InputError) as info:
        scenario_from_json(text)
    assert fragment in str(info.value)


def test_compare_plans_side_by_side_with_fleet_total():
    plan_a = pd.DataFrame({"route": ["chat", "nightly"], "status": ["ok", "ok"], "engine": ["vllm", "trtllm"],
                           "engine_version": ["0.11", "1.0"], "gpu": ["h100", "h200"], "precision": ["fp8", "fp8"],
                           "tp": [1, 1], "gpus": [4, 2], "gpu_usd_per_month": [100.0, 50.0],
                           "eng_usd_per_month": [0.0, 10.0], "total_usd_per_month": [100.0, 60.0]})
    plan_b = plan_a.assign(gpus=[8, 2], total_usd_per_month=[200.0, 60.0])
    table = compare_plans({"now": plan_a, "x2": plan_b})
    total = table.set_index("route").loc["fleet total"]
    assert total["now: $/month"] == 160.0 and total["x2: $/month"] == 260.0
    assert total["now: GPUs"] == 6 and total["now: engine / GPU"] == "2 of 2 routes"
    assert table.set_index("route").loc["chat", "now: engine / GPU"] == "vllm 0.11 / h100 fp8 tp1"
    tuned = compare_plans({"tuned": plan_a.assign(engine_config=["tuned", "default"])}).set_index("route")
    assert list(tuned["tuned: engine / GPU"][:2]) == ["vllm 0.11 [tuned] / h100 fp8 tp1", "trtllm 1.0 / h200 fp8 tp1"]


def test_drop_unknown_allow_values_warns_per_setting():
    known = {"engines": ["trtllm", "vllm"], "gpus": ["h100", "h200"], "precisions": ["fp8"], "configs": ["default"]}
    settings, warnings = drop_unknown(Settings(gpus=("h999", "h100"), engines=("vllm",)), known)
    assert settings.gpus == ("h100",) and settings.engines == ("vllm",)
    assert warnings == ["link parameter gpus: unknown h999 ignored (allowed: h100; known: h100, h200)"]
    _, from_file = drop_unknown(Settings(precisions=("int3",)), known, "peak.json")
    assert from_file == ["peak.json: setting precisions: unknown int3 ignored (no precisions restriction applied; "
                         "known: fp8)"]


def test_resolve_logs_reads_only_inside_the_examples_folder_or_the_sessions_uploads(tmp_path):
    from ui.scenario import planning_logs, resolve_logs
    from ui.uploads import SessionLogs
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "a.csv").write_text("x")
    (tmp_path.parent / "secret.csv").write_text("x")
    routes = pd.DataFrame({"name": ["in", "out", "none", "named"], "log": ["traces/a.csv", "../secret.csv", "", "b.csv"]})
    with pytest.raises(InputError, match=r"^up.csv: route 'out' replays request log '../secret.csv', which the app "
                                         r"cannot read \('\.\.' leads out .*\); route 'named' .*: upload the log"):
        resolve_logs(routes, tmp_path, "up.csv")  # never sized on arrivals made up from the log's statistics
    logs = SessionLogs()
    saved = logs.keep(b"y", "b.csv")
    resolved = resolve_logs(routes.iloc[[0, 2, 3]], tmp_path, "up.csv", logs)
    assert list(resolved["log"]) == ["traces/a.csv", "", str(saved)]  # bundled: no local path
    assert saved.read_bytes() == b"y" and logs.keep(b"z", "b.csv") != saved
    planned = planning_logs(resolved, tmp_path)  # what the planner reads
    assert list(planned["log"]) == [str(tmp_path / "traces" / "a.csv"), "", str(saved)]
    absolute = pd.DataFrame({"name": ["bundled"], "log": [str(tmp_path / "traces" / "a.csv")]})
    assert list(resolve_logs(absolute, tmp_path, "examples/routes.csv")["log"]) == ["traces/a.csv"]


def test_a_log_cell_may_name_only_a_bundled_file_or_this_sessions_upload(tmp_path):
    """Issue 47 item 1: an absolute path, `..`, a symlink out of the examples and another session's upload are
    refused, each with its reason; a session's folder is its own (mode 0o700, removed with the session)."""
    import gc
    import stat

    from ui.uploads import SessionLogs, readable_log
    bundled = tmp_path / "examples"
    (bundled / "traces").mkdir(parents=True)
    (bundled / "traces" / "a.csv").write_text("x")
    (bundled / "traces" / "out.csv").symlink_to("/etc/passwd")
    mine, theirs = SessionLogs(), SessionLogs()
    their_log = theirs.keep(b"theirs", "log.csv")
    refused = {"/etc/passwd": "an absolute path", "../examples/traces/a.csv": "'..' leads out",
               "traces/out.csv": "neither a bundled example nor", str(their_log): "an absolute path",
               "log.csv": "neither a bundled example nor", "nul\x00.csv": "not a file name"}
    for given, why in refused.items():
        with pytest.raises(InputError, match=why):
            readable_log(given, mine, bundled)
    my_log = mine.keep(b"mine", "log.csv")
    assert readable_log("log.csv", mine, bundled) == readable_log(str(my_log), mine, bundled) == str(my_log)
    assert readable_log("traces/a.csv", mine, bundled) == "traces/a.csv"
    assert mine.folder != theirs.folder and stat.S_IMODE(mine.folder.stat().st_mode) == 0o700
    folder = mine.folder
    del mine
    gc.collect()
    assert not folder.exists()


def test_an_edited_routes_notes_are_marked_as_describing_the_row_before():
    """Issue 35, item 8: after the rate is edited, 'rate 5 req/s' in the notes is not read as the row now."""
    import pandas as pd

    from ui.scenario import edits_by_route, with_stale_notes_marked

    base = pd.DataFrame({"name": ["chat", "code"], "rate_rps": [5.0, 2.0], "notes": ["rate 5 req/s", "as measured"]})
    edited = base.assign(rate_rps=[8.0, 2.0])
    assert edits_by_route(base, edited) == {"chat": "rate_rps 5 → 8"}
    marked = with_stale_notes_marked(base, edited)
    assert marked.loc[0, "notes"] == ("edited in the app (rate_rps 5 → 8); the rest of this note describes the row "
                                      "before: rate 5 req/s")
    assert marked.loc[1, "notes"] == "as measured"
    rewritten = edited.assign(notes=["rate 8 req/s", "as measured"])  # the user rewrote the note: left alone
    assert with_stale_notes_marked(base, rewritten).loc[0, "notes"] == "rate 8 req/s"
    assert with_stale_notes_marked(base, base).equals(base)
