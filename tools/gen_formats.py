"""Write docs/formats.md from the declared schemas (fleetfacts/schema.py), so the docs match the code.

    python tools/gen_formats.py          (tests/planner/test_formats_doc.py checks it is up to date)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fleetfacts.schema import ENGINE_OPS, PLAN, PRICES, PROFILE, ROUTES, schema_markdown  # noqa: E402

DOC = Path(__file__).resolve().parent.parent / "docs" / "formats.md"

INTRO = {
    "profile": "`profiles/**/*.csv`: one row per measured or published point (tidy). Each measured profile folder "
               "also holds `env.json`, the environment record (engine and version, torch, CUDA, driver, GPU, engine "
               "arguments, command line, date). `output_tok_per_s` is for the whole replica (all `tp` GPUs).",
    "routes": "What you plan for (`examples/routes.csv`). Online routes need `rate_rps` and at least one SLO; batch "
              "routes need `num_requests` and `deadline_hours`. Allow-lists are `;`-separated slugs, empty = all. "
              "Route names are text of any kind (quotes, commas, `;`, a leading `=`), but a name's control "
              "characters (line feed, carriage return, tab, ESC, NUL, DEL, C1, U+2028/2029, bidirectional "
              "overrides) are replaced by visible escapes when the routes load (`\\x0a`, `\\x1b`, `\\u2028`; "
              "backslashes doubled in such a name; `fleetfacts.schema.escape_controls`), so the plan, options and "
              "fleet CSVs (one line per row), the workbook, the deployment files and the console all carry the "
              "same printable name (`tests/fuzz/test_hostile_names.py`).",
    "prices": "`planner/data/prices.csv`: one GPU-hour price per row, with its source and the date it was read.",
    "engine_ops": "`planner/data/engine_ops.csv`: what a model update costs on each engine version (matched by the "
                  "PEP 440 specifier in `versions`). The engineer hourly rate is a plan assumption.",
    "plan": "The output of `python -m planner plan` and of the app's download: one row per route, a plain CSV "
            "(header on line 1, no comment lines; `pd.read_csv` and spreadsheets open it as is). Numbers are rounded "
            "for people: tokens/s to whole tokens, dollars to cents, milliseconds to 0.1. The assumptions (hours "
            "per month, engineer rate, provider, pricing type, ...), price sources and profile sources go beside "
            "it in `<name>.assumptions.json`, so a saved plan can be re-run (`plan --assumptions-from PLAN.csv`) "
            "and compared (`plan --baseline PLAN.csv`); plans of the older format, with `# fleetplan-assumptions: "
            "{json}` on line 1, are still read. Text cells that would start a spreadsheet formula (`= + - @`, "
            "tab, CR) are written with a leading `'` and read back exactly. Files are written to a temp file in "
            "the same folder and renamed, so a killed run never leaves a partial plan. The assumptions JSON "
            "records the SHA-256 of the CSV written with it (`plan_csv_sha256`): `simulate`, `deploy` and "
            "`--baseline` refuse a CSV that is not that one (a run killed between the JSON and the CSV write, or a "
            "CSV edited or cut since; remove the JSON to use an edited CSV without it), and, with no JSON beside "
            "it, a CSV whose last row is cut short.",
}


def render() -> str:
    parts = ["# File formats", "",
             "Generated from `fleetfacts/schema.py` by `python tools/gen_formats.py`; do not edit by hand. Every file "
             "is validated on load: a mistake gives a one-line error naming the file, the line and the column. "
             "Identifiers (`slug`) are lowercase and accepted case-insensitively.", ""]
    for schema in (PROFILE, ROUTES, PRICES, ENGINE_OPS, PLAN):
        parts += [f"## {schema.name}", "", INTRO[schema.name], "", schema_markdown(schema), ""]
        if schema.renamed:
            parts += ["Renamed columns (a file with the old name still reads): "
                      + ", ".join(f"`{old}` -> `{new}`" for old, new in schema.renamed) + ".", ""]
    return "\n".join(parts)


if __name__ == "__main__":
    DOC.write_text(render(), encoding="utf-8")
    print(f"wrote {DOC}")
