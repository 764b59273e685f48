"""One table of figures and ratios from one run, the goals checked against it, and JSON/Markdown output."""

from __future__ import annotations

from typing import Any

GOAL_RSS_MB = 250.0
GOAL_SOAK_GROWTH_MB = 10.0


def _find(rows: list[dict[str, Any]], section: str, db: str, scenario: str) -> dict[str, Any] | None:
    return next((r for r in rows if r["section"] == section and r["db"] == db and r["scenario"] == scenario), None)


def _found(rows: list[dict[str, Any]], section: str, db: str, scenario: str) -> dict[str, Any]:
    """A row that is there because a figure of another row was computed from it."""
    row = _find(rows, section, db, scenario)
    assert row is not None, f"no {section} row for {db} {scenario}"
    return row


RAW_FOR = {
    "produce-1": "insert 1/txn",
    "pairs": "insert 1/txn",
    "produce-100": "insert 100/txn",
    "notxn": "insert 100/txn",
    "txn": "insert 100/txn",
    "txn-producer": "insert 100/txn",
    "notxn-big": "insert 100/txn",
    "txn-big": "insert 100/txn",
    "produce-1000": "insert 1000/txn",
    "fetch": "read 100/query",
    "fetch-arrow": "read 100/query",
}


# Mode-2 transactions, each compared with the same writes without a transaction.
TRANSACTION_SCENARIOS = {
    "txn": ("notxn", "explicit begin, 4 x 25"),
    "txn-producer": ("notxn", "Kafka style, 4 x 25"),
    "txn-big": ("notxn-big", "Kafka style, 10 x 100"),
}
# Issue 37's goals against the bare ASGI ceiling: scenario -> (target ratio, text).
BARE_GOALS = {
    "produce-1": (0.4, "produce 1 message/request / bare ASGI ceiling"),
    "produce-100": (0.3, "produce 100 messages/request / bare ASGI ceiling"),
    "pairs": (0.25, "half-message pairs / bare ASGI ceiling"),
}
FETCH_GOALS = {
    "fetch": (0.5, "read_committed fetch 100/request, JSON / raw database read"),
    "fetch-arrow": (0.75, "read_committed fetch 100/request, Arrow / raw database read"),
}


def annotate(rows: list[dict[str, Any]]) -> None:
    """Add ``vs_ceiling`` (same scenario on the storage-free FastAPI app), ``vs_bare`` (on the bare
    ASGI app) and ``vs_raw`` (msgs/s over raw DB rows/s)."""
    for row in rows:
        if row["section"] != "halfmq":
            continue
        ceiling = _find(rows, "ceiling", row["db"], row["scenario"])
        if ceiling and ceiling["rate"]:
            row["vs_ceiling"] = round(row["rate"] / ceiling["rate"], 3)
        bare = _find(rows, "bare", row["db"], row["scenario"])
        if bare and bare["rate"]:
            row["vs_bare"] = round(row["rate"] / bare["rate"], 3)
        raw = _find(rows, "storage", row["db"], RAW_FOR.get(row["scenario"], ""))
        if raw and raw["rate"] and row.get("messages_per_s") is not None:
            row["vs_raw"] = round(row["messages_per_s"] / raw["rate"], 3)
        if row["scenario"] in TRANSACTION_SCENARIOS:
            plain = _find(rows, "halfmq", row["db"], TRANSACTION_SCENARIOS[row["scenario"]][0])
            if plain and plain["rate"]:
                row["txn_overhead"] = round(1 - row["rate"] / plain["rate"], 3)


def _own_overhead(rows: list[dict[str, Any]], section: str, db: str, scenario: str, baseline: str) -> float | None:
    """A storage-free app's own loss going from the plain writes to the transaction (its extra requests)."""
    txn, plain = _find(rows, section, db, scenario), _find(rows, section, db, baseline)
    if txn and plain and plain["rate"]:
        return float(1 - txn["rate"] / plain["rate"])
    return None


def _peer_best(rows: list[dict[str, Any]], label: str) -> dict[str, Any] | None:
    found = [r for r in rows if r["section"] == "peer" and label in r["label"] and r["rate"]]
    return max(found, key=lambda r: r["rate"]) if found else None


def goals(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 37's goals, each checked against figures of this run."""
    rows = results["rows"]
    out: list[dict[str, Any]] = []
    dbs = sorted({r["db"] for r in rows if r["section"] == "halfmq"})
    rabbit_tx = _peer_best(rows, "AMQP tx")
    nats = _peer_best(rows, "NATS")
    for db in dbs:
        for scenario, (target, text) in BARE_GOALS.items():
            row = _find(rows, "halfmq", db, scenario)
            if not row or "vs_bare" not in row:
                continue
            bare = _found(rows, "bare", db, scenario)
            met = row["vs_bare"] >= target
            detail = f"{row['rate']:,.0f} vs {bare['rate']:,.0f} {row['unit']}"
            target_text = f">= {target}"
            if scenario == "produce-1" and nats is not None:
                # ... and ahead of NATS JetStream with many publishers in flight.
                met = met and row["rate"] > nats["rate"]
                detail += f"; NATS JetStream x{nats['concurrency']} {nats['rate']:,.0f} msg/s ({row['rate'] / nats['rate']:.2f}x)"
                target_text += ", > NATS"
            if scenario == "pairs" and rabbit_tx is not None:
                met = met and row["rate"] >= 2 * rabbit_tx["rate"]
                detail += (f"; RabbitMQ AMQP tx x{rabbit_tx['concurrency']} {rabbit_tx['rate']:,.0f} msg/s "
                           f"({row['rate'] / rabbit_tx['rate']:.2f}x)")
                target_text += ", >= 2x RabbitMQ tx"
            out.append({"db": db, "goal": text, "value": f"{row['vs_bare']:.2f}", "target": target_text, "met": met,
                        "detail": detail})
        for scenario, (baseline, style) in TRANSACTION_SCENARIOS.items():
            txn = _find(rows, "halfmq", db, scenario)
            if not txn or "txn_overhead" not in txn:
                continue
            overhead = txn["txn_overhead"]
            plain = _found(rows, "halfmq", db, baseline)
            detail = f"{txn['rate']:,.1f} txn/s vs {plain['rate']:,.1f} batches/s"
            free = _own_overhead(rows, "ceiling", db, scenario, baseline)
            bare_own = _own_overhead(rows, "bare", db, scenario, baseline)
            if free is not None:
                detail += f"; the storage-free app's own overhead {free:.1%}"
            if bare_own is not None:
                detail += f", the bare app's {bare_own:.1%}"
            if scenario == "txn-big":
                limit, target_text = 0.10, "<= 10%"
            else:  # the commit is a request of its own: allowed what it costs with no storage at all, + 10 points
                limit, target_text = (free if free is not None else 0.0) + 0.10, "<= storage-free app's + 10 points"
            verdict: bool | None = overhead <= limit
            if (plain.get("vs_ceiling") or 0) < 0.05:
                # Both sides stalled (e.g. lock waits): a ratio of two stalls says nothing about the transaction.
                verdict = None
                detail += f"; not meaningful: the baseline itself runs at {plain.get('vs_ceiling', 0):.0%} of its ceiling"
            goal = f"mode-2 transaction overhead ({style}) vs the same writes without a transaction"
            out.append({"db": db, "goal": goal, "value": f"{overhead:.1%}", "target": target_text, "met": verdict,
                        "detail": detail})
        for scenario, (target, text) in FETCH_GOALS.items():
            row = _find(rows, "halfmq", db, scenario)
            raw = _find(rows, "storage", db, RAW_FOR[scenario])
            if row and "vs_raw" in row and raw:
                detail = f"{row['messages_per_s']:,.0f} msg/s vs {raw['rate']:,.0f} rows/s"
                raw_per_cpu = raw.get("extra", {}).get("rows_per_cpu_s")
                if raw_per_cpu and row.get("server_cpu"):
                    # Per CPU-second of the broker (front + core) against the raw read's: steadier on a busy
                    # machine. Neither side counts PostgreSQL's own processes.
                    per_cpu = row["messages_per_s"] / row["server_cpu"]
                    share = per_cpu / raw_per_cpu
                    detail += f"; per CPU-second {per_cpu:,.0f} msg vs {raw_per_cpu:,.0f} rows ({share:.0%})"
                out.append({"db": db, "goal": text, "value": f"{row['vs_raw']:.2f}", "target": f">= {target}",
                            "met": row["vs_raw"] >= target, "detail": detail})
        rss = max((r["rss_mb"] or 0 for r in rows if r["section"] == "halfmq" and r["db"] == db), default=0)
        out.append({"db": db, "goal": "broker RSS under load, all its processes < 250 MB", "value": f"{rss:.0f} MB",
                    "target": "< 250 MB", "met": rss < GOAL_RSS_MB, "detail": "max over all scenarios"})
    for soak in results.get("soak", []):
        out.append({"db": soak["db"], "goal": f"RSS flat over a {soak['seconds']:.0f}s soak",
                    "value": f"{soak['growth_mb']:+.1f} MB",
                    "target": f"growth < {GOAL_SOAK_GROWTH_MB:.0f} MB, max < 250 MB",
                    "met": soak["growth_mb"] < GOAL_SOAK_GROWTH_MB and soak["max_mb"] < GOAL_RSS_MB,
                    "detail": f"first fifth {soak['first_fifth_median_mb']} MB, last fifth {soak['last_fifth_median_mb']} MB, "
                              f"max {soak['max_mb']} MB"})
    return out


def _fmt(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


HEADER = ("section", "db", "scenario", "conc", "rate", "unit", "msgs/s", "p50 ms", "p99 ms", "vs ceiling", "vs bare",
          "vs raw DB", "RSS MB",
          "srv cpu", "host cpu", "errors")


def table_rows(rows: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for r in rows:
        ratio = r.get("vs_ceiling")
        ratio_text = "-" if ratio is None else f"{ratio:.0%}"
        if r.get("txn_overhead") is not None:
            ratio_text += f" (txn overhead {r['txn_overhead']:.1%})"
        raw = r.get("vs_raw")
        bare = r.get("vs_bare")
        out.append(
            (
                r["section"],
                r["db"],
                r["label"] + (f" x{r['concurrency']}" if r["section"] == "peer" else ""),
                _fmt(r.get("concurrency")),
                _fmt(r["rate"]),
                r["unit"],
                _fmt(r.get("messages_per_s")),
                _fmt(r.get("p50_ms"), 1),
                _fmt(r.get("p99_ms"), 1),
                ratio_text,
                "-" if bare is None else f"{bare:.2f}",
                "-" if raw is None else f"{raw:.0%}",
                _fmt(r.get("rss_mb")),
                _fmt(r.get("server_cpu"), 2),
                _fmt(r.get("machine_cpu"), 2),
                _fmt(r.get("errors")),
            )
        )
    return out


def text_table(rows: list[dict[str, Any]]) -> str:
    body = table_rows(rows)
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(HEADER)]

    def line(cells: tuple[str, ...]) -> str:
        padded = (c.ljust(w) if i < 3 or i == 5 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))
        return "  ".join(padded)

    return "\n".join([line(HEADER), line(tuple("-" * w for w in widths)), *(line(b) for b in body)])


def markdown_table(rows: list[dict[str, Any]]) -> str:
    body = table_rows(rows)
    out = ["| " + " | ".join(HEADER) + " |", "|" + "|".join("---" for _ in HEADER) + "|"]
    out += ["| " + " | ".join(b) + " |" for b in body]
    return "\n".join(out)


def goals_text(items: list[dict[str, Any]], markdown: bool = False) -> str:
    if markdown:
        out = ["| db | goal | value | target | met | detail |", "|---|---|---|---|---|---|"]
        out += [
            f"| {g['db']} | {g['goal']} | {g['value']} | {g['target']} | {_verdict(g['met'], True)} | {g['detail']} |"
            for g in items
        ]
        return "\n".join(out)
    return "\n".join(
        f"[{_verdict(g['met'], False)}] {g['db']:<10} {g['goal']}: {g['value']} (target {g['target']}; {g['detail']})"
        for g in items
    )


def _verdict(met: bool | None, markdown: bool) -> str:
    if met is None:
        return "n/a" if markdown else "N/A "
    if markdown:
        return "yes" if met else "**no**"
    return "MET " if met else "MISS"


def render(results: dict[str, Any]) -> str:
    parts = [text_table(results["rows"]), "", "Goals:", goals_text(results["goals"])]
    for soak in results.get("soak", []):
        parts.append(f"Soak {soak['db']} {soak['seconds']:.0f}s: RSS {soak['first_fifth_median_mb']} -> "
                     f"{soak['last_fifth_median_mb']} MB (max {soak['max_mb']}), "
                     f"produce {soak['produce_rate']} req/s + {soak['pair_rate']} pairs/s, errors {soak['errors']}")
    return "\n".join(parts)


def markdown(results: dict[str, Any]) -> str:
    """The generated part of docs/benchmarks.md: tables, goals, soak, experiments and plans."""
    parts = ["### Results", "", markdown_table(results["rows"]), "", "### Goals", ""]
    parts += [goals_text(results["goals"], markdown=True), ""]
    for soak in results.get("soak", []):
        series = ", ".join(f"{mb:.0f}" for _, mb in soak["samples_mb"])
        parts += [
            f"### Soak ({soak['db']}, {soak['seconds']:.0f} s)",
            "",
            f"`{soak.get('command', '')}`: wrk single-message produce at 32 connections plus 16 prepare+commit chains, "
            f"RSS sampled every 5 s. Median of the first fifth {soak['first_fifth_median_mb']} MB, of the last fifth "
            f"{soak['last_fifth_median_mb']} MB (growth {soak['growth_mb']:+.1f} MB), max {soak['max_mb']} MB; "
            f"{soak['produce_rate']} produce req/s and {soak['pair_rate']} pairs/s sustained, {soak['errors']} errors.",
            "",
            f"RSS series (MB): {series}",
            "",
        ]
    experiments = results.get("experiments")
    if experiments:
        parts += ["### Experiments (unmodified broker, one knob changed)", "", f"`{experiments['command']}`", "",
                  "| db | variant | scenario | rate | unit | p50 ms | p99 ms | srv cpu | errors |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in experiments["rows"]:
            parts.append(f"| {r['db']} | {r['variant']} | {r['label']} | {r['rate']:,.1f} | {r['unit']} | {r['p50_ms']:,.1f} "
                         f"| {r['p99_ms']:,.1f} | {r['server_cpu']} | {r['errors']} |")
        parts.append("")
    at_scale = results.get("plans_at_scale")
    if at_scale:
        parts += [f"### Query plans at {at_scale['rows']:,} rows per table (`bench.plans`)", "",
                  f"`{at_scale['command']}`: synthetic history where everything but the newest 1 % is finished, "
                  "then ANALYZE.", ""]
        for db, found in at_scale["plans"].items():
            for name, plan in found.items():
                parts += [f"**{db}: {name}**", "", "```", plan.get("plan", ""), "```", ""]
    for db, meta in results.get("databases", {}).items():
        parts += [f"### Query plans after the run: {db} ({meta.get('version', '')})", ""]
        for name, plan in meta.get("plans", {}).items():
            parts += [f"**{name}**", "", "```sql", plan.get("sql", ""), "```", "", "```", plan.get("plan", ""), "```", ""]
    return "\n".join(parts)


if __name__ == "__main__":
    import json
    import sys
    from pathlib import Path

    print(markdown(json.loads(Path(sys.argv[1]).read_text())))
