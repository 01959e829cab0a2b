"""Issue 47 item 1: the app reads only what is bundled or uploaded in this session, and bounds each upload.

A fault campaign read the first line of /etc/passwd through a routes upload whose `log` named it, and planned
on another session's upload.  Each test drives the real app (AppTest) the way that campaign did."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.test_app import APP, NO_EDITS, ROUTES_CSV, TIMEOUT_S, assert_clean

BUNDLED_LOG = b"traces/azure_llm_2023_code.csv"
CODE_LOG = (Path(APP).parent / "examples" / "traces" / "azure_llm_2023_code.csv").read_bytes()
# Lines of files no session uploaded: none may show on the page.
SECRETS = [Path("/etc/passwd").read_text().splitlines()[0], f"FLEETPLAN_CACHE_DIR={os.environ['FLEETPLAN_CACHE_DIR']}"]
OUTSIDE = ["/etc/passwd", "/proc/self/environ", "../../../../../../etc/passwd", "traces/../../README.md"]


@pytest.fixture
def app() -> AppTest:
    return AppTest.from_file(APP, default_timeout=TIMEOUT_S).run()


def texts(at: AppTest) -> list[str]:
    """Every message, caption and table the page shows."""
    shown = [e.value for e in [*at.error, *at.warning, *at.info, *at.success, *at.caption, *at.markdown]]
    return shown + [d.value.to_csv() for d in at.dataframe]


def assert_nothing_leaked(at: AppTest) -> None:
    assert_clean(at)
    for text in texts(at):
        for secret in SECRETS:
            assert secret not in text, text


def bundled_log_kept(at: AppTest) -> bool:
    return "traces/azure_llm_2023_code.csv" in set(at.session_state["routes_base"]["log"])


def routes_naming(log: str) -> bytes:
    return ROUTES_CSV.replace(BUNDLED_LOG, log.encode())


def test_a_routes_upload_naming_a_file_outside_the_app_is_refused_naming_the_route(app):
    for i, given in enumerate(OUTSIDE):
        app.file_uploader(key="routes_upload").set_value((f"mine-{i}.csv", routes_naming(given), "text/csv")).run()
        assert_nothing_leaked(app)
        errors = [e.value for e in app.error]
        assert any("route 'code-completion'" in e and "cannot read" in e and "unchanged" in e for e in errors), \
            (given, errors)
        assert bundled_log_kept(app), given


def test_a_log_typed_into_the_routes_editor_outside_the_app_is_refused_and_never_read(app):
    app.session_state["routes_editor"] = {**NO_EDITS, "edited_rows": {2: {"log": "/etc/passwd"}}}
    app.run()
    assert_nothing_leaked(app)
    errors = [e.value for e in app.error]
    assert any("route 'code-completion'" in e and "cannot read" in e for e in errors), errors


def upload_log(at: AppTest, name: str) -> str:
    """Upload the bundled code log as `name` and add its routes; the path the routes table shows for it."""
    at.file_uploader(key="log_upload").set_value((name, CODE_LOG, "text/csv")).run()
    at.button(key="log_add").click().run()
    assert_clean(at)
    logs = [str(p) for p in at.session_state["routes_base"]["log"] if str(p).endswith(name)]
    assert len(logs) == 1, list(at.session_state["routes_base"]["log"])
    return logs[0]


def test_another_sessions_upload_is_refused_and_each_session_keeps_its_own_unreadable_folder():
    first = AppTest.from_file(APP, default_timeout=TIMEOUT_S).run()
    theirs = Path(upload_log(first, "mine.csv"))
    folder = theirs.parents[1]
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(theirs.stat().st_mode) & 0o077 == 0 and stat.S_IMODE(theirs.parent.stat().st_mode) == 0o700
    second = AppTest.from_file(APP, default_timeout=TIMEOUT_S).run()
    second.file_uploader(key="routes_upload").set_value(("theirs.csv", routes_naming(str(theirs)), "text/csv")).run()
    assert any("route 'code-completion'" in e.value and "cannot read" in e.value for e in second.error)
    assert bundled_log_kept(second)
    doc = {"format": "fleetplan-scenario", "version": 1, "name": "theirs", "settings": {},
           "routes": [{"name": "stolen", "model": "llama-3.1-8b", "traffic": "online", "rate_rps": 1.0,
                       "input_len_mean": 100.0, "output_len_mean": 10.0, "ttft_slo_ms": 1000.0, "log": str(theirs)}]}
    second.file_uploader(key="scenario_upload").set_value(("theirs.json", json.dumps(doc).encode(),
                                                           "application/json")).run()
    assert any("route 'stolen'" in e.value and "cannot read" in e.value for e in second.error)
    assert bundled_log_kept(second)
    mine = Path(upload_log(second, "mine.csv"))  # the same name: this session's own copy, in its own folder
    assert mine.parents[1] != folder and stat.S_IMODE(mine.parents[1].stat().st_mode) == 0o700
    assert_clean(second)


def test_a_log_over_the_apps_size_or_row_bound_is_refused_before_it_is_kept(app):
    from ui.uploads import MAX_APP_LOG_BYTES, MAX_APP_LOG_ROWS
    rows = b"".join(b"%d,1,1\n" % (1_700_000_000 + i) for i in range(MAX_APP_LOG_ROWS + 1))
    too_long = b"timestamp,prompt_tokens,completion_tokens\n" + rows
    too_big = too_long + b"#" * (MAX_APP_LOG_BYTES + 1 - len(too_long))
    for name, data, bound in (("long.csv", too_long, f"{MAX_APP_LOG_ROWS:,} requests"),
                              ("big.csv", too_big, f"{MAX_APP_LOG_BYTES / 2**20:.0f} MiB")):
        app.file_uploader(key="log_upload").set_value((name, data, "text/csv")).run()
        assert_clean(app)
        errors = [e.value for e in app.error]
        assert any(e.startswith(name) and bound in e for e in errors), (bound, errors)
        assert not app.session_state["uploaded_logs"].names, "a refused upload was kept"


def test_the_servers_upload_limit_is_the_apps_log_bound():
    """Streamlit refuses a larger upload before the app sees it; the app's own check gives the message."""
    import tomllib

    from ui.uploads import MAX_APP_LOG_BYTES
    config = tomllib.loads((Path(APP).parent / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxUploadSize"] * 2**20 == MAX_APP_LOG_BYTES  # Streamlit's megabytes are MiB
