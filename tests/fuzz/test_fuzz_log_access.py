"""Fuzzing what a route's log may reach (issue 47 items 1 and 3).

- Uploads: a routes CSV uploaded to the app whose `log` cell is built from absolute paths, another session's
  upload, `..` segments, symlinks and hostile text.  The documented outcome: the upload is refused with one
  line naming the route, or every log it keeps is a bundled example or this session's own upload.
- Route names: a route on a log of several routes.  The documented outcome: it replays only rows of one route
  of the log whose name is its own (ignoring case), or is refused with one line naming the log's routes.

Examples per test: FUZZ_EXAMPLES (tests/fuzz/test_fuzz_inputs.py).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetfacts.errors import InputError
from tests.conftest import REPO
from tests.fuzz.test_fuzz_inputs import FUZZ, HOSTILE

ROUTES_CSV = (REPO / "examples" / "routes.csv").read_bytes()
BUNDLED_LOG = b"traces/azure_llm_2023_code.csv"


@pytest.fixture(scope="module")
def sessions():
    """Two sessions' uploads (this one's and another's), each holding a log named log.csv, and an examples
    folder with a bundled log and a symlink out of it."""
    from ui.uploads import SessionLogs
    mine, theirs = SessionLogs(), SessionLogs()
    mine.keep(b"timestamp,prompt_tokens,completion_tokens\n1,1,1\n2,1,1\n", "log.csv")
    theirs.keep(b"timestamp,prompt_tokens,completion_tokens\n1,9,9\n2,9,9\n", "log.csv")
    with tempfile.TemporaryDirectory() as folder:
        bundled = Path(folder) / "examples"
        (bundled / "traces").mkdir(parents=True)
        (bundled / "traces" / "code.csv").write_text("x")
        (bundled / "traces" / "out.csv").symlink_to("/etc/passwd")
        yield mine, theirs, bundled


def path_pieces(theirs) -> list[str]:
    their_log = next(iter(theirs.names.values()))
    return ["/etc/passwd", "/proc/self/environ", "//etc/passwd", "/", "~", ".", "..", "traces", "code.csv",
            "out.csv", "log.csv", "traces/code.csv", str(their_log), str(their_log.parent), str(theirs.folder),
            str(REPO / "examples" / "routes.csv"), "/tmp", "\\..\\", "%2e%2e", "examples"]


PIECES = st.lists(st.one_of(st.sampled_from(range(20)), st.sampled_from(HOSTILE), st.text(max_size=12)),
                  min_size=1, max_size=5)


@FUZZ
@given(PIECES, st.booleans())
def test_fuzzed_log_paths_in_an_upload_are_refused_or_stay_in_this_session_or_the_examples(sessions, pieces,
                                                                                         absolute):
    from fleetfacts.schema import ROUTES
    from ui.scenario import read_csv_upload, resolve_logs
    mine, theirs, bundled = sessions
    known = path_pieces(theirs)
    given_log = "/".join(known[p] if isinstance(p, int) else p for p in pieces)
    given_log = ("/" + given_log) if absolute else given_log
    cell = given_log.replace('"', '""')
    data = ROUTES_CSV.replace(BUNDLED_LOG, f'"{cell}"'.encode("utf-8", "surrogatepass"))
    try:
        routes = resolve_logs(read_csv_upload(data, ROUTES, "up.csv"), bundled, "up.csv", mine)
    except InputError as err:
        message = str(err)
        assert "\n" not in message.strip() and message.startswith("up.csv"), message
        return
    for log in routes["log"]:
        if not log:
            continue
        found = (bundled / log).resolve()
        assert found.is_relative_to(bundled.resolve()) or found.is_relative_to(mine.folder), (given_log, log)
        assert not found.is_relative_to(theirs.folder), (given_log, log)


LOG_ROUTES = ["chat", "code", "Chat-2", "search", "ÉTÉ", "a b", ""]


@FUZZ
@given(st.lists(st.sampled_from(LOG_ROUTES[:-1]), min_size=2, max_size=6, unique=True),
       st.one_of(st.sampled_from(LOG_ROUTES), st.sampled_from(HOSTILE), st.text(max_size=8)),
       st.sampled_from([str.lower, str.upper, str.title, lambda s: s]))
def test_a_route_on_a_multi_route_log_replays_its_own_rows_or_is_refused_naming_the_logs_routes(routes, name,
                                                                                                 spelling):
    from planner.traffic.workload import own_rows
    name = spelling(name)
    requests = pd.DataFrame({"route": [routes[i % len(routes)] for i in range(60)], "t_s": range(60)})
    try:
        mine = own_rows(requests, name, "log.csv")
    except InputError as err:
        message = str(err)
        assert "\n" not in message and message.startswith("log.csv: route"), message
        assert not [r for r in routes if r == name], message  # an exact match is never refused
        assert "ignoring case" in message or all(r in message for r in sorted(routes)[:10]), message
        return
    replayed = set(mine["route"])
    assert len(replayed) == 1 and next(iter(replayed)).casefold() == name.casefold(), (name, replayed)
    assert len(mine) == (requests["route"] == next(iter(replayed))).sum()
