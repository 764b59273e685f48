"""The benchmark chart: bars as long as the broker's share of its ceilings, goals marked."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from bench import plot


def _row(section: str, scenario: str, rate: float, messages: float | None = None) -> dict[str, object]:
    return {"section": section, "db": "sqlite", "scenario": scenario, "label": scenario, "unit": "req/s", "rate": rate,
            "messages_per_s": messages if messages is not None else rate}


def test_each_scenario_is_a_bar_scaled_to_its_share_of_the_storage_free_app() -> None:
    results = {
        "broker_source": {"commit": "0123456789abcdef"},
        "rows": [
            _row("storage", "insert 1/txn", 2000),
            _row("ceiling", "produce-1", 1000),
            _row("halfmq", "produce-1", 500),
            _row("ceiling", "fetch", 800),
            _row("halfmq", "fetch", 200),
        ],
    }
    root = ET.fromstring(plot.svg(results))
    ns = "{http://www.w3.org/2000/svg}"
    widths = [float(r.get("width", 0)) for r in root.iter(f"{ns}rect") if r.get("fill") == plot.COLOURS["sqlite"]]
    scale = plot._SCALE_WIDTH
    # produce-1 at 50% of its ceiling and 25% of raw rows/s; fetch at 25%; the legend's square.
    assert sorted(widths) == sorted([10, scale * 0.5, scale * 0.25, scale * 0.25])
    texts = [t.text or "" for t in root.iter(f"{ns}text")]
    assert "50% (500 req/s)" in texts and "25% (200 req/s)" in texts
    assert any("commit 0123456" in t for t in texts)
    goal_x = plot._LABEL_WIDTH + 0.5 * scale
    assert any(float(line.get("x1", -1)) == goal_x and line.get("stroke") == "black" for line in root.iter(f"{ns}line"))
