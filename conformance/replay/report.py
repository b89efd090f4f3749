"""Reports of a replay: terminal summary, JUnit (one case per instance), one page per instance
(Markdown and HTML) with the first divergence as history beside answer, and allure results."""

from __future__ import annotations

import html
import json
import time
import uuid
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from conformance.replay.history import file_name
from conformance.reporting.allure import AllureAttachment, AllureCase, write_case
from conformance.replay.judge import Verdict
from conformance.replay.session import InstanceResult

_ALLURE_STATUS = {Verdict.CLEAN: "passed", Verdict.NONDETERMINISM: "failed", Verdict.STALL: "failed",
                  Verdict.NOT_REGISTERED: "failed", Verdict.ERROR: "broken"}
_NAMESPACE = uuid.UUID("0b8f9d52-3f8e-4d7e-9a43-6a1c2e5b7d10")


def terminal_line(r: InstanceResult) -> str:
    mark = "ok  " if r.ok else "FAIL"
    return f"{mark} {r.history.label}: {r.headline()}"


def summary_line(results: Sequence[InstanceResult]) -> str:
    counts = Counter(r.verdict for r in results)
    parts = [f"{counts[v]} {v.value}" for v in Verdict if counts[v]]
    return f"{len(results)} instance(s): " + (", ".join(parts) if parts else "nothing replayed")


def print_summary(results: Sequence[InstanceResult], out: TextIO) -> None:
    for r in results:
        if not r.ok and r.divergence is not None:
            d = r.divergence
            print(f"\n{r.history.label} ({r.history.path or 'history'}): {r.headline()}", file=out)
            print(_side_by_side_text(d.history_side, d.code_side), file=out)
    print(summary_line(results), file=out)


def _side_by_side_text(left: Sequence[str], right: Sequence[str], width: int = 60) -> str:
    rows = [f"  {'history (recorded)':<{width}} | the code answers"]
    rows.append(f"  {'-' * width}-+-{'-' * 30}")
    for i in range(max(len(left), len(right))):
        a = left[i] if i < len(left) else ""
        b = right[i] if i < len(right) else ""
        rows.append(f"  {a[:width]:<{width}} | {b}")
    return "\n".join(rows)


def page_name(r: InstanceResult) -> str:
    return file_name(r.history.instance_id).removesuffix(".history.json")


def render_markdown(r: InstanceResult) -> str:
    h = r.history
    lines = [f"# Replay of `{h.instance_id}` (workflow `{h.name}`)", "",
             f"- verdict: **{r.verdict.value}**", f"- {r.headline()}",
             f"- history: `{h.path or '-'}` ({len(h.events)} events, {r.turns_total} turns, status {h.status} when "
             f"captured from {h.source or '?'} at {h.captured_at or '?'})",
             f"- turns replayed: {r.turns_replayed}", ""]
    d = r.divergence
    if d is not None:
        lines += [f"## First divergence: turn {d.turn}" + (f", event #{d.event_index}" if d.event_index is not None
                                                          else ""), "", d.summary, ""]
        if d.stall_description:
            lines += [f"daprd would record ExecutionStalled `{d.stall_reason}`: `{d.stall_description}`", ""]
        lines += ["| history (recorded) | the code answers |", "|---|---|"]
        for i in range(max(len(d.history_side), len(d.code_side))):
            a = d.history_side[i] if i < len(d.history_side) else ""
            b = d.code_side[i] if i < len(d.code_side) else ""
            lines.append(f"| {_cell(a)} | {_cell(b)} |")
        lines += ["", "The answer in the engine's view:", "", "```json",
                  json.dumps(d.answer, indent=1, ensure_ascii=False, default=str), "```"]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return f"`{text.replace('|', '/')}`" if text else ""


def render_html(r: InstanceResult) -> str:
    h, d = r.history, r.divergence
    e = html.escape
    parts = ["<!doctype html><meta charset='utf-8'>",
             f"<title>replay {e(h.instance_id)}</title>",
             "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:2px 8px;font-family:monospace;white-space:pre;vertical-align:top}"
             ".mark{background:#fdd}.ok{color:#070}.bad{color:#b00}</style>",
             f"<h1>Replay of {e(h.instance_id)} <small>(workflow {e(h.name)})</small></h1>",
             f"<p class='{'ok' if r.ok else 'bad'}'><b>{e(r.verdict.value)}</b>: {e(r.headline())}</p>",
             f"<p>{len(h.events)} events, {r.turns_total} turns, status {e(h.status)} when captured from "
             f"{e(h.source or '?')}; {r.turns_replayed} turn(s) replayed.</p>"]
    if d is not None:
        parts.append(f"<h2>First divergence: turn {d.turn}"
                     + (f", event #{d.event_index}" if d.event_index is not None else "") + "</h2>")
        parts.append(f"<p>{e(d.summary)}</p>")
        if d.stall_description:
            parts.append(f"<p>daprd would record ExecutionStalled <code>{e(d.stall_reason or '')}</code>: "
                         f"<code>{e(d.stall_description)}</code></p>")
        parts.append("<table><tr><th>history (recorded)</th><th>the code answers</th></tr>")
        for i in range(max(len(d.history_side), len(d.code_side))):
            a = d.history_side[i] if i < len(d.history_side) else ""
            b = d.code_side[i] if i < len(d.code_side) else ""
            cls = " class='mark'" if a.startswith(">") else ""
            parts.append(f"<tr><td{cls}>{e(a)}</td><td>{e(b)}</td></tr>")
        parts.append("</table>")
    return "\n".join(parts) + "\n"


def render_junit(results: Sequence[InstanceResult]) -> str:
    suite = ET.Element("testsuite", name="conformance replay", tests=str(len(results)),
                       failures=str(sum(1 for r in results if r.verdict not in (Verdict.CLEAN, Verdict.ERROR))),
                       errors=str(sum(1 for r in results if r.verdict is Verdict.ERROR)),
                       time=f"{sum(r.seconds for r in results):.3f}")
    for r in results:
        case = ET.SubElement(suite, "testcase", classname=f"replay.{r.history.name}", name=r.history.instance_id,
                             time=f"{r.seconds:.3f}")
        if r.ok:
            continue
        tag = "error" if r.verdict is Verdict.ERROR else "failure"
        el = ET.SubElement(case, tag, type=r.verdict.name, message=r.headline())
        if r.divergence is not None:
            el.text = _side_by_side_text(r.divergence.history_side, r.divergence.code_side)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def _allure(r: InstanceResult, out: Path) -> None:
    uid = str(uuid.uuid5(_NAMESPACE, f"{r.history.instance_id}/{r.history.path}"))
    trace = "" if r.divergence is None else _side_by_side_text(r.divergence.history_side, r.divergence.code_side)
    stop = round(time.time() * 1000)
    write_case(AllureCase(
        uuid=uid, full_name=f"replay.{r.history.name}.{r.history.instance_id}",
        name=f"{r.history.name} / {r.history.instance_id}", status=_ALLURE_STATUS[r.verdict],
        message=r.headline(), trace=trace, start_ms=stop - round(r.seconds * 1000), stop_ms=stop,
        labels=(("suite", "conformance replay"), ("feature", r.history.name), ("tag", r.verdict.name)),
        attachments=(AllureAttachment("replay (history beside answer)", "text/markdown", "md", render_markdown(r)),)),
        out)


def write_reports(results: Sequence[InstanceResult], out_dir: Path) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    pages = out_dir / "instances"
    pages.mkdir(exist_ok=True)
    allure = out_dir / "allure-results"
    allure.mkdir(exist_ok=True)
    index = ["# conformance replay", "", summary_line(results), "", "| instance | workflow | verdict | detail |",
             "|---|---|---|---|"]
    for r in results:
        name = page_name(r)
        (pages / f"{name}.md").write_text(render_markdown(r), encoding="utf-8")
        (pages / f"{name}.html").write_text(render_html(r), encoding="utf-8")
        _allure(r, allure)
        index.append(f"| [{r.history.instance_id}](instances/{name}.md) | {r.history.name} | {r.verdict.value} | "
                     f"{r.headline().replace('|', '/')} |")
    (out_dir / "replay.md").write_text("\n".join(index) + "\n", encoding="utf-8")
    (out_dir / "junit.xml").write_text(render_junit(results), encoding="utf-8")
    summary = [{"instanceId": r.history.instance_id, "workflow": r.history.name, "file": str(r.history.path or ""),
                "verdict": r.verdict.name, "headline": r.headline(), "turns": r.turns_total,
                "turnsReplayed": r.turns_replayed,
                "eventIndex": None if r.divergence is None else r.divergence.event_index,
                "turn": None if r.divergence is None else r.divergence.turn,
                "stallReason": None if r.divergence is None else r.divergence.stall_reason,
                "stallDescription": None if r.divergence is None else r.divergence.stall_description}
               for r in results]
    (out_dir / "summary.json").write_text(json.dumps({"instances": summary}, indent=1) + "\n", encoding="utf-8")
    return {"summary": out_dir / "replay.md", "junit": out_dir / "junit.xml", "pages": pages, "allure": allure,
            "json": out_dir / "summary.json"}
