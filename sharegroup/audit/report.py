"""The audit's outputs: the summary table, the JSON report and the picture (matplotlib, Agg canvas)."""

from __future__ import annotations

import json
import os

from persister.state_records import StateKey

from .result import AuditEnvironmentError, AuditResult
from .rules import RULE_DESCRIPTIONS, Rule

__all__ = ["format_summary", "write_report", "draw_picture", "key_label", "REPORT_NAME", "PICTURE_NAME"]

REPORT_NAME = "report.json"
PICTURE_NAME = "audit.png"
VIOLATIONS_SHOWN = 20
PICTURE_KEYS_MAX = 24  # rows of the histogram and lines of the progress plot; the rest is summed up


def key_label(key: StateKey | None) -> str:
    """`group/topic8:partition`, short enough for a table row or a legend."""
    if key is None:
        return "(log)"
    return f"{key.group_id}/{str(key.topic_id)[:8]}:{key.partition}"


def _count(n: int) -> str:
    return f"{n:,}"


def format_summary(result: AuditResult) -> str:
    """The summary table printed on stdout: counts, time, violations by rule, the first violations and
    the verdict."""
    r = result
    where = f"spark, master {r.master}" if r.engine == "spark" else "single-process Python replay"
    live = len(r.final_states)
    seconds = r.elapsed_seconds
    rate = f"{r.records / seconds:,.0f} records/s" if seconds > 0 and r.records else "-"
    if r.session_seconds and r.records:
        rate += " (first job of a fresh JVM)"
    time_text = f"{seconds:.2f} s" + (f" (+ {r.session_seconds:.1f} s Spark start-up)" if r.session_seconds else "")
    rows = [
        ("segments", _count(r.segments)),
        ("log offsets", f"{r.log_start_offset:,} .. {max(r.log_start_offset, r.log_end_offset - 1):,}"),
        ("records", _count(r.records)),
        ("  checkpoints", _count(r.checkpoints)),
        ("  deltas", _count(r.deltas)),
        ("  tombstones", _count(r.tombstones)),
        ("share-partitions (keys)", f"{_count(r.keys)} ({_count(live)} live)"),
        ("violations", _count(len(r.violations))),
        ("time", time_text),
        ("throughput", rate),
    ]
    if r.torn_tail is not None:
        path, pos, nbytes = r.torn_tail
        rows.append(("torn tail (tolerated)", f"{nbytes} bytes at byte {pos} of {os.path.basename(path)}"))
    width = max(len(name) for name, _ in rows)
    value_width = max(len(value) for _, value in rows)
    lines = [f"sharegroup audit of {r.log_dir} ({where})"]
    rule_line = "+" + "-" * (width + 2) + "+" + "-" * (value_width + 2) + "+"
    lines.append(rule_line)
    for name, value in rows:
        lines.append(f"| {name:<{width}} | {value:>{value_width}} |")
    lines.append(rule_line)
    by_rule = r.violations_by_rule()
    if by_rule:
        lines.append("violations by rule:")
        for rule, n in by_rule.items():
            lines.append(f"  {rule:<28} {n:>8,}   {RULE_DESCRIPTIONS[Rule(rule)]}")
        lines.append(f"first {min(VIOLATIONS_SHOWN, len(r.violations))} of {len(r.violations):,} violations:")
        for v in r.violations[:VIOLATIONS_SHOWN]:
            offset = "-" if v.log_offset is None else f"{v.log_offset:,}"
            lines.append(f"  offset {offset:>10}  {v.rule:<26}  {key_label(v.key)}  {v.detail}")
        lines.append(f"verdict: FAILED, {len(r.violations):,} violation(s) of {len(by_rule)} rule(s)")
    else:
        lines.append(
            f"verdict: OK, every invariant holds over {r.records:,} records of {r.keys:,} share-partitions"
        )
    return "\n".join(lines)


def _key_json(key: StateKey | None):
    if key is None:
        return None
    return {"group_id": key.group_id, "topic_id": str(key.topic_id), "partition": key.partition}


def report_dict(result: AuditResult) -> dict:
    """The machine-readable report (what report.json holds)."""
    r = result
    return {
        "ok": r.ok,
        "log_dir": r.log_dir,
        "engine": r.engine,
        "master": r.master,
        "options": {
            "delivery_count_limit": r.options.delivery_count_limit,
            "snapshot_update_records_per_snapshot": r.options.snapshot_update_records_per_snapshot,
        },
        "log_start_offset": r.log_start_offset,
        "log_end_offset": r.log_end_offset,
        "segments": r.segments,
        "records": r.records,
        "keys": r.keys,
        "live_keys": len(r.final_states),
        "checkpoints": r.checkpoints,
        "deltas": r.deltas,
        "tombstones": r.tombstones,
        "torn_tail": None
        if r.torn_tail is None
        else {"path": r.torn_tail[0], "byte_pos": r.torn_tail[1], "bytes": r.torn_tail[2]},
        "elapsed_seconds": round(r.elapsed_seconds, 3),
        "session_seconds": round(r.session_seconds, 3),
        "violations_by_rule": r.violations_by_rule(),
        "violations": [
            {"key": _key_json(v.key), "log_offset": v.log_offset, "rule": str(v.rule), "detail": v.detail}
            for v in r.violations
        ],
        "rules": {str(rule): text for rule, text in RULE_DESCRIPTIONS.items()},
        "final_states": [
            {
                "key": _key_json(key),
                "checkpoint_epoch": s.checkpoint_epoch,
                "state_epoch": s.state_epoch,
                "leader_epoch": s.leader_epoch,
                "start_offset": s.start_offset,
                "delivery_complete_count": s.delivery_complete_count,
                "state_batches": [list(b) for b in s.state_batches],
            }
            for key, s in r.final_states.items()
        ],
        "keys_detail": [
            {
                "key": _key_json(key),
                "records": kr.records,
                "checkpoints": kr.checkpoints,
                "deltas": kr.deltas,
                "tombstones": kr.tombstones,
                "first_offset": kr.first_offset,
                "last_offset": kr.last_offset,
                "violations": len(kr.violations),
                "delivery_counts_written": {str(c): n for c, n in sorted(kr.delivery_counts_written.items())},
            }
            for key, kr in r.key_results.items()
        ],
    }


def write_report(result: AuditResult, out_dir: str) -> str:
    """Write report.json into `out_dir` (created if needed); return its path."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, REPORT_NAME)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(report_dict(result), f, indent=2)
        f.write("\n")
    os.replace(tmp, path)
    return path


def _histogram_rows(per_key: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """The PICTURE_KEYS_MAX keys with the most offsets as rows (label, {delivery_count: offsets}); the
    rest summed into one row. Keys with nothing are left out."""
    ranked = sorted(((sum(c.values()), label, c) for label, c in per_key if c), key=lambda item: (-item[0], item[1]))
    rows = [(label, counts) for _total, label, counts in ranked[:PICTURE_KEYS_MAX]]
    rest = ranked[PICTURE_KEYS_MAX:]
    if rest:
        merged: dict[int, int] = {}
        for _total, _label, counts in rest:
            for c, n in counts.items():
                merged[c] = merged.get(c, 0) + n
        rows.append((f"{len(rest)} other share-partitions", merged))
    return rows


def _final_state_counts(result: AuditResult) -> list[tuple[str, dict]]:
    per_key = []
    for key, state in result.final_states.items():
        counts: dict[int, int] = {}
        for first, last, _state, count in state.state_batches:
            counts[count] = counts.get(count, 0) + (last - first + 1)
        per_key.append((key_label(key), counts))
    return _histogram_rows(per_key)


def _written_counts(result: AuditResult) -> list[tuple[str, dict]]:
    return _histogram_rows([(key_label(key), kr.delivery_counts_written) for key, kr in result.key_results.items()])


def _heatmap(fig, ax, rows, *, title: str, colour_label: str, empty: str, limit: int) -> None:
    """Rows = share-partitions, columns = delivery counts, colour = offsets (log scale)."""
    import numpy as np
    from matplotlib.colors import LogNorm

    ax.set_title(title, fontsize=11)
    if not rows:
        ax.text(0.5, 0.5, empty, ha="center", va="center", transform=ax.transAxes, wrap=True)
        ax.set_xticks([])
        ax.set_yticks([])
        return
    max_count = max(c for _label, counts in rows for c in counts)
    grid = np.zeros((len(rows), max_count + 1))
    for i, (_label, counts) in enumerate(rows):
        for c, n in counts.items():
            grid[i, c] = n
    image = ax.imshow(
        np.ma.masked_equal(grid, 0),
        aspect="auto",
        cmap="viridis",
        norm=LogNorm(vmin=1, vmax=max(1.0, grid.max())),
        interpolation="nearest",
    )
    fig.colorbar(image, ax=ax, label=colour_label)
    ax.set_yticks(range(len(rows)), [label for label, _ in rows], fontsize=8)
    ax.set_xticks(range(max_count + 1))
    ax.set_xlabel("delivery count")
    if len(rows) * (max_count + 1) <= 160:
        for i in range(len(rows)):
            for c in range(max_count + 1):
                if grid[i, c]:
                    colour = "black" if image.norm(grid[i, c]) > 0.6 else "white"  # readable on viridis
                    ax.text(c, i, f"{int(grid[i, c]):,}", ha="center", va="center", fontsize=7, color=colour)
    if limit <= max_count:
        ax.axvline(limit + 0.5, color="firebrick", linestyle="--", linewidth=1)


def draw_picture(result: AuditResult, out_dir: str) -> str:
    """Draw audit.png into `out_dir`: per share-partition, the delivery counts of the final states and
    of everything the deltas wrote (heat maps: offsets per delivery count), and the start-offset
    progress over log offsets with the violations marked. Uses matplotlib's Agg canvas directly, so no
    global backend is switched."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise AuditEnvironmentError("the audit picture needs matplotlib: pip install matplotlib") from None

    os.makedirs(out_dir, exist_ok=True)
    fig = Figure(figsize=(18, 6.5), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    final_ax, written_ax, progress_ax = fig.subplots(1, 3, width_ratios=(1, 1, 1.4))
    verdict = "OK" if result.ok else f"FAILED: {len(result.violations):,} violations"
    fig.suptitle(
        f"sharegroup audit of {result.log_dir}: {result.records:,} records, {result.keys:,} share-partitions, "
        f"{verdict}",
        fontsize=13,
        color="black" if result.ok else "firebrick",
    )
    limit = result.options.delivery_count_limit
    _heatmap(
        fig,
        final_ax,
        _final_state_counts(result),
        title="delivery counts in the final states (in flight)",
        colour_label="offsets in the final state",
        empty="no in-flight offsets in the final states:\nevery share-partition has finished\nall it fetched",
        limit=limit,
    )
    _heatmap(
        fig,
        written_ax,
        _written_counts(result),
        title="delivery counts written by the deltas",
        colour_label="offsets written (each write counts)",
        empty="no delta wrote any state batch",
        limit=limit,
    )

    series = sorted(
        ((key, kr.progress) for key, kr in result.key_results.items() if kr.progress),
        key=lambda item: -(item[1][-1][1] - item[1][0][1]),
    )
    for i, (key, points) in enumerate(series):
        xs = [p[0] for p in points]
        ys = [p[1] for p in points]
        if i < PICTURE_KEYS_MAX // 2:
            progress_ax.step(xs, ys, where="post", linewidth=1.2, label=key_label(key))
        else:
            progress_ax.step(xs, ys, where="post", linewidth=0.6, color="0.75")
    bad = [v.log_offset for v in result.violations if v.log_offset is not None]
    if bad:
        progress_ax.plot(bad, [0] * len(bad), "|", color="firebrick", markersize=14, label="violation", clip_on=False)
    if series:
        progress_ax.legend(fontsize=7, loc="best", ncol=2)
    else:
        progress_ax.text(
            0.5, 0.5, "no start-offset progress", ha="center", va="center", transform=progress_ax.transAxes
        )
    progress_ax.set_xlabel("log offset (state log)")
    progress_ax.set_ylabel("share-partition start offset (SPSO)")
    progress_ax.set_title("start-offset progress", fontsize=11)
    progress_ax.grid(True, alpha=0.3)

    path = os.path.join(out_dir, PICTURE_NAME)
    fig.savefig(path)
    return path
