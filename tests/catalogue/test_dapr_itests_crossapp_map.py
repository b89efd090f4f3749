"""docs/dapr-itests-crossapp.md, the cross-app / propagation / access-policy part of the map of dapr's
workflow integration suite, stays honest: the same checks as the main map (scenarios exist, statuses
known, counts add up), and it lists exactly the cases the main map sends to it."""

from __future__ import annotations

from pathlib import Path

from tests.catalogue.test_dapr_itests_map import MAP, parse, problems_of

CROSSAPP_MAP = Path(__file__).resolve().parents[2] / "docs" / "dapr-itests-crossapp.md"


def test_the_crossapp_map_is_consistent() -> None:
    problems = problems_of(CROSSAPP_MAP.read_text(encoding="utf-8"))
    assert not problems, "\n".join(problems)


def test_the_crossapp_map_holds_exactly_the_cases_the_main_map_sends_to_it() -> None:
    _, main_rows, _ = parse(MAP.read_text(encoding="utf-8"))
    _, rows, _ = parse(CROSSAPP_MAP.read_text(encoding="utf-8"))
    sent = {r.case for r in main_rows if r.status == "crossapp map"}
    here = {r.case for r in rows}
    assert here == sent, f"only in the main map: {sorted(sent - here)}; only here: {sorted(here - sent)}"
    assert not [r.case for r in rows if r.status == "crossapp map"], "a row here cannot send a case on again"


def test_a_wrong_scenario_name_is_caught(tmp_path: Path) -> None:
    text = CROSSAPP_MAP.read_text(encoding="utf-8").replace("`crossapp/stream-cut-mid-call`",
                                                            "`crossapp/no-such-scenario`", 1)
    assert any("no-such-scenario" in p for p in problems_of(text))
