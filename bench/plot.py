"""``python -m bench.plot RESULTS.json OUT.svg``: the broker's rates against its ceilings, as an SVG.

One bar per scenario and database: the broker's rate as a share of the storage-free app's
in the same run, a thin bar under it for the share of the raw database's rows/s, and a
mark at the scenario's goal where it has one. Plain SVG, so the docs need no plotting
library to be rebuilt.
"""

from __future__ import annotations

import json
import sys
from html import escape
from pathlib import Path
from typing import Any

from bench.report import annotate

# Scenario, its label on the chart, and its goal as a share of the storage-free app.
SCENARIOS: list[tuple[str, str, float | None]] = [
    ("produce-1", "produce, 1 msg/request", 0.5),
    ("produce-100", "produce, 100 msgs/request", 0.5),
    ("produce-1000", "produce, 1000 msgs/request", None),
    ("pairs", "half prepare + commit pairs", 0.4),
    ("notxn", "4 x 25 msgs, no transaction", None),
    ("txn", "mode-2 txn, explicit begin", None),
    ("txn-producer", "mode-2 txn, Kafka style", None),
    ("fetch", "read_committed fetch", None),
]
COLOURS = {"sqlite": "#4477aa", "postgresql": "#cc6677"}

_LABEL_WIDTH = 210
_SCALE_WIDTH = 480  # pixels for 100%
_BAR_HEIGHT = 11
_RAW_HEIGHT = 4
_ROW_HEIGHT = 2 * (_BAR_HEIGHT + _RAW_HEIGHT + 4) + 10
_TOP = 58


def svg(results: dict[str, Any]) -> str:
    """The chart for one ``python -m bench --output`` file."""
    rows = results["rows"]
    annotate(rows)
    broker = {(r["db"], r["scenario"]): r for r in rows if r["section"] == "halfmq"}
    databases = [db for db in COLOURS if any(key[0] == db for key in broker)]
    scenarios = [s for s in SCENARIOS if any((db, s[0]) in broker for db in databases)]
    height = _TOP + len(scenarios) * _ROW_HEIGHT + 30
    width = _LABEL_WIDTH + _SCALE_WIDTH + 170  # the figures in a column right of the scale
    commit = str(results.get("broker_source", {}).get("commit", ""))[:7]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="10" y="18" font-size="13" font-weight="bold">halfmq as a share of the storage-free app, same run'
        f"{escape(f' (commit {commit})') if commit else ''}</text>",
        '<text x="10" y="34">thick bar: rate vs the storage-free app; thin bar: messages/s vs raw database rows/s; '
        "black mark: goal</text>",
    ]
    for n, db in enumerate(databases):
        x: float = 10 + n * 110
        parts.append(f'<rect x="{x}" y="41" width="10" height="10" fill="{COLOURS[db]}"/>')
        parts.append(f'<text x="{x + 14}" y="50">{escape(db)}</text>')
    for percent in range(0, 101, 25):
        x = _LABEL_WIDTH + percent * _SCALE_WIDTH / 100
        parts.append(f'<line x1="{x}" y1="{_TOP - 4}" x2="{x}" y2="{height - 26}" stroke="#ddd"/>')
        parts.append(f'<text x="{x}" y="{height - 12}" text-anchor="middle">{percent}%</text>')
    for index, (scenario, label, goal) in enumerate(scenarios):
        top = _TOP + index * _ROW_HEIGHT
        parts.append(f'<text x="{_LABEL_WIDTH - 8}" y="{top + 22}" text-anchor="end">{escape(label)}</text>')
        if goal is not None:
            x = _LABEL_WIDTH + goal * _SCALE_WIDTH
            bottom = top + _ROW_HEIGHT - 10
            parts.append(f'<line x1="{x}" y1="{top - 2}" x2="{x}" y2="{bottom}" stroke="black" stroke-width="2"/>')
        for n, db in enumerate(databases):
            row = broker.get((db, scenario))
            if row is None:
                continue
            y = top + n * (_BAR_HEIGHT + _RAW_HEIGHT + 4)
            parts.extend(_bars(row, y, COLOURS[db]))
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _bars(row: dict[str, Any], y: float, colour: str) -> list[str]:
    share, raw = row.get("vs_ceiling"), row.get("vs_raw")
    bars = []
    if share is not None:
        bars.append(
            f'<rect x="{_LABEL_WIDTH}" y="{y}" width="{_length(share)}" height="{_BAR_HEIGHT}" fill="{colour}"/>'
        )
        text = f"{share:.0%} ({row['rate']:,.0f} {row['unit']})"
        bars.append(f'<text x="{_LABEL_WIDTH + _SCALE_WIDTH + 8}" y="{y + 9}">{escape(text)}</text>')
    if raw is not None:
        bars.append(
            f'<rect x="{_LABEL_WIDTH}" y="{y + _BAR_HEIGHT + 1}" width="{_length(raw)}" height="{_RAW_HEIGHT}" '
            f'fill="{colour}" fill-opacity="0.45"/>'
        )
    return bars


def _length(share: float) -> float:
    """Bar length; shares past 100% (the raw database at one message per transaction) are cut there."""
    return round(min(share, 1.0) * _SCALE_WIDTH, 1)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m bench.plot RESULTS.json OUT.svg", file=sys.stderr)
        return 2
    Path(argv[1]).write_text(svg(json.loads(Path(argv[0]).read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
