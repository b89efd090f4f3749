"""A sequence diagram of one scenario's protocol exchange, as a self-contained SVG.

Lanes, left to right: the harness (the client channel), the sidecar, the fault proxy (a dashed
line on the worker side of the sidecar) and the worker. One arrow per transcript entry in time
order, labelled with the rpc and its summary (the full entry is the arrow's tooltip). Rows are
evenly spaced, not proportional to time; a pause of a second or more gets a marked break. The
spacing tightens as the transcript grows, so ~200 messages stay one readable page to scroll.

Styles: request solid, unary response dashed, stream item blue; a message hit by a fault is red
(a dropped one ends at the proxy with a cross); a call that failed shows its gRPC status in orange.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

from conformance.events import Channel, MessageDirection, TranscriptEntry
from conformance.reporting.model import short_summary, transcript_line, xml_safe

WIDTH = 1080
_TIME_X = 8
_LANES = {"harness": 140, "sidecar": 470, "proxy": 590, "worker": 1000}
_LANE_TITLES = {"harness": "harness (client)", "sidecar": "sidecar", "proxy": "fault proxy", "worker": "worker"}
_HEADER_H = 64
_GAP_THRESHOLD_S = 1.0
_GAP_H = 18

_INK = "#1f2937"
_RESPONSE = "#4b5563"
_ITEM = "#1d4ed8"
_FAULT = "#dc2626"
_STATUS = "#c2410c"
_STRIPE = "#f3f4f6"
_LIFELINE = "#9ca3af"

_DROPPING = ("drop", "cut", "lost", "kill", "discard", "swallow")


@dataclass(frozen=True, slots=True)
class _Geometry:
    row_h: int
    font: int


def _geometry(n: int) -> _Geometry:
    if n <= 40:
        return _Geometry(26, 12)
    if n <= 100:
        return _Geometry(20, 11)
    return _Geometry(16, 10)


def _ends(entry: TranscriptEntry) -> tuple[str, str]:
    """(from lane, to lane) of an entry's arrow."""
    outward = entry.direction in ("response", "item")  # from the sidecar to its caller
    other = "worker" if entry.channel is Channel.WORKER else "harness"
    return ("sidecar", other) if outward else (other, "sidecar")


def _is_dropping(fault: str) -> bool:
    f = fault.lower()
    return any(word in f for word in _DROPPING)


def _truncate(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[: max(1, max_chars - 1)] + "…"


_NARROW = set("iljtfrI.,:;'!|()[] ")
_WIDE = set("mwMW@%")


def _text_width(text: str, font: int, *, bold: bool = False) -> float:
    """An estimate of the rendered width in DejaVu Sans (the widest of the usual sans fonts)."""
    em = 0.0
    for ch in text:
        if ch in _NARROW:
            em += 0.33
        elif ch in _WIDE:
            em += 0.9
        elif ch.isupper():
            em += 0.7
        else:
            em += 0.6
    return em * font * (1.1 if bold else 1.0)


def _fit(text: str, width: float, font: int) -> str:
    """`text`, cut with an ellipsis so that it fits in `width` pixels."""
    if _text_width(text, font) <= width:
        return text
    lo, hi = 0, len(text)
    while lo < hi:  # the longest prefix that fits with the ellipsis
        mid = (lo + hi + 1) // 2
        if _text_width(text[:mid] + "…", font) <= width:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo] + "…"


def render_timeline(transcript: Sequence[TranscriptEntry], *, title: str = "") -> str:
    entries = sorted(transcript, key=lambda e: e.t)  # stable: equal times keep their order
    g = _geometry(len(entries))
    body: list[tuple[str, str]] = []  # (row background, row content)
    y = _HEADER_H + 8
    previous_t: float | None = None
    for index, entry in enumerate(entries):
        if previous_t is not None and entry.t - previous_t >= _GAP_THRESHOLD_S:
            body.append(_gap(y, entry.t - previous_t, g))
            y += _GAP_H
        previous_t = entry.t
        body.append(_row(entry, index, y, g))
        y += g.row_h
    bottom = y + 6
    height = bottom + (_HEADER_H if len(entries) > 30 else 0) + 46

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
        f'font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="{g.font}">',
        f"<title>{escape(xml_safe(title or 'protocol timeline'))}</title>",
        "<defs>",
        *(
            _marker(name, color)
            for name, color in (("ink", _INK), ("resp", _RESPONSE), ("item", _ITEM), ("fault", _FAULT), ("status", _STATUS))
        ),
        "</defs>",
        f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/>',
    ]
    # stripes first, so lifelines and arrows are drawn over them
    out.append("".join(stripe for stripe, _ in body))
    for lane, x in _LANES.items():
        dash = ' stroke-dasharray="4 3"' if lane == "proxy" else ""
        out.append(f'<line x1="{x}" y1="{_HEADER_H - 8}" x2="{x}" y2="{bottom}" stroke="{_LIFELINE}" stroke-width="1"{dash}/>')
    out.append(_lane_heads(14, title))
    if entries:
        faults = sum(1 for e in entries if e.fault)
        stats = f"{len(entries)} messages · {faults} {'fault' if faults == 1 else 'faults'} · {entries[-1].t - entries[0].t:.3f} s"
        out.append(f'<text x="{WIDTH - 8}" y="14" text-anchor="end" font-size="12" fill="{_RESPONSE}">{stats}</text>')
    if len(entries) > 30:
        out.append(_lane_heads(bottom + 6, ""))
    out.extend(content for _, content in body)
    if not entries:
        out.append(
            f'<text x="{WIDTH // 2}" y="{_HEADER_H + 20}" text-anchor="middle" fill="{_RESPONSE}">no protocol messages recorded</text>'
        )
    out.append(_legend(height - 22))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _marker(name: str, color: str) -> str:
    return (
        f'<marker id="ah-{name}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" '
        f'markerUnits="userSpaceOnUse" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{color}"/></marker>'
    )


def _lane_heads(y: int, title: str) -> str:
    parts = []
    if title:
        parts.append(f'<text x="{_TIME_X}" y="{y}" font-weight="bold" font-size="13">{escape(xml_safe(title))}</text>')
    for lane, x in _LANES.items():
        w = 110 if lane != "proxy" else 78
        top = y + 10 if title else y
        fill, ink = ("#ffffff", _LIFELINE) if lane == "proxy" else ("#e5e7eb", _INK)
        parts.append(
            f'<rect x="{x - w // 2}" y="{top}" width="{w}" height="24" rx="4" fill="{fill}" stroke="{ink}"/>'
            f'<text x="{x}" y="{top + 16}" text-anchor="middle" font-size="12" fill="{_INK}">{_LANE_TITLES[lane]}</text>'
        )
    return "".join(parts)


def _gap(y: int, seconds: float, g: _Geometry) -> tuple[str, str]:
    mid = y + _GAP_H // 2
    content = (
        f'<line x1="{_TIME_X}" y1="{mid}" x2="{WIDTH - 8}" y2="{mid}" stroke="{_LIFELINE}" stroke-dasharray="2 4"/>'
        f'<rect x="{_LANES["sidecar"] + 100}" y="{mid - 8}" width="150" height="16" fill="#ffffff"/>'
        f'<text x="{_LANES["sidecar"] + 175}" y="{mid + 4}" text-anchor="middle" font-style="italic" '
        f'fill="{_RESPONSE}" font-size="{g.font}">… {seconds:.2f} s later …</text>'
    )
    return "", content


def _row(entry: TranscriptEntry, index: int, y: int, g: _Geometry) -> tuple[str, str]:
    src, dst = _ends(entry)
    x1, x2 = _LANES[src], _LANES[dst]
    line_y = y + g.row_h - 6
    fault = entry.fault or ""
    status = entry.status if entry.status and entry.status.upper() != "OK" else ""
    dropped = bool(fault) and _is_dropping(fault)
    if dropped and entry.channel is Channel.WORKER:
        x2 = _LANES["proxy"]  # the proxy swallowed it

    if fault:
        color, marker = _FAULT, "fault"
    elif entry.direction is MessageDirection.ITEM:
        color, marker = _ITEM, "item"
    elif entry.direction is MessageDirection.RESPONSE:
        color, marker = (_STATUS, "status") if status else (_RESPONSE, "resp")
    else:
        color, marker = _INK, "ink"
    dash = ' stroke-dasharray="6 4"' if entry.direction is MessageDirection.RESPONSE else ""
    width = "2" if fault else "1.3"
    head = "" if dropped else f' marker-end="url(#ah-{marker})"'
    shapes = [f'<line x1="{x1}" y1="{line_y}" x2="{x2}" y2="{line_y}" stroke="{color}" stroke-width="{width}"{dash}{head}/>']
    if dropped:
        shapes.append(
            f'<path d="M{x2 - 4},{line_y - 4} L{x2 + 4},{line_y + 4} M{x2 - 4},{line_y + 4} L{x2 + 4},{line_y - 4}" '
            f'stroke="{_FAULT}" stroke-width="2.2"/>'
        )

    # label above the arrow, between the two lanes of its channel
    lo, hi = sorted((_LANES[src], _LANES[dst]))
    span = hi - lo - 12
    marks = []
    if fault:
        marks.append(("✗ " if dropped else "⚡ ") + fault)
    if status:
        marks.append(status)
    mark_text = "  [" + "; ".join(marks) + "]" if marks else ""
    room = span - _text_width(entry.rpc + " ", g.font, bold=True) - _text_width(mark_text, g.font, bold=True)
    summary = _fit(short_summary(entry), room, g.font)
    label_y = line_y - 5
    label = (
        f'<text x="{(lo + hi) // 2}" y="{label_y}" text-anchor="middle" fill="{_INK}">'
        f'<tspan font-weight="bold">{escape(xml_safe(entry.rpc))}</tspan> {escape(xml_safe(summary))}'
        + (f'<tspan fill="{_FAULT if fault else _STATUS}" font-weight="bold">{escape(xml_safe(mark_text))}</tspan>' if marks else "")
        + "</text>"
    )
    time_label = f'<text x="{_TIME_X}" y="{line_y + 3}" font-family="DejaVu Sans Mono, monospace" fill="{_RESPONSE}">+{entry.t:.3f}s</text>'

    tooltip = transcript_line(entry)
    if entry.message:
        tooltip += "\n" + _truncate(json.dumps(entry.message, ensure_ascii=False, default=str), 1500)
    stripe = f'<rect x="0" y="{y}" width="{WIDTH}" height="{g.row_h}" fill="{_STRIPE}"/>' if index % 2 else ""
    if fault:
        stripe = f'<rect x="0" y="{y}" width="{WIDTH}" height="{g.row_h}" fill="#fee2e2"/>'
    return stripe, (
        f"<g><title>{escape(xml_safe(tooltip))}</title>"
        + f'<rect x="0" y="{y}" width="{WIDTH}" height="{g.row_h}" fill="transparent"/>'
        + time_label
        + "".join(shapes)
        + label
        + "</g>"
    )


def _legend(y: int) -> str:
    items = [
        ("request", _INK, "", "ink"),
        ("response", _RESPONSE, ' stroke-dasharray="6 4"', "resp"),
        ("stream item", _ITEM, "", "item"),
        ("fault applied", _FAULT, "", "fault"),
        ("call failed (gRPC status)", _STATUS, ' stroke-dasharray="6 4"', "status"),
    ]
    parts = []
    x = _TIME_X
    for text, color, dash, marker in items:
        parts.append(
            f'<line x1="{x}" y1="{y}" x2="{x + 34}" y2="{y}" stroke="{color}" stroke-width="1.6"{dash} marker-end="url(#ah-{marker})"/>'
            f'<text x="{x + 42}" y="{y + 4}" font-size="11" fill="{_INK}">{escape(text)}</text>'
        )
        x += 50 + int(len(text) * 6.6) + 24
    parts.append(
        f'<path d="M{x},{y - 5} L{x + 10},{y + 5} M{x},{y + 5} L{x + 10},{y - 5}" stroke="{_FAULT}" stroke-width="2.2"/>'
        f'<text x="{x + 18}" y="{y + 4}" font-size="11" fill="{_INK}">dropped by the proxy</text>'
    )
    return "".join(parts)
