"""What the demos check at the end of a run: the durable share state, replayed from disk, against what
every share-partition leader held (`check_durable_state`), and the Spark audit of the state log
(`audit_state_log`).
"""

from __future__ import annotations

import inspect
import os
import uuid
from typing import Any, NamedTuple, Protocol, Sequence

from ..types import RecordState, StateBatch

__all__ = ["AuditedSummary", "LeaderState", "audit_state_log", "check_durable_state"]


class LeaderState(NamedTuple):
    """What one share-partition leader held at the end of the run; `loaded` is False when no fetch ever
    loaded the share-partition (a run stopped before any consumer fetched from it)."""

    start_offset: int
    state_batches: list[StateBatch]
    delivery_complete_count: int
    log_end_offset: int
    loaded: bool = True


class AuditedSummary(Protocol):
    """Where a demo's summary keeps the audit's outcome (`DemoSummary`, `LiveSummary`)."""

    audit: object | None  # sharegroup.audit.AuditResult when the audit ran
    audit_error: str | None  # why the audit could not run


# -- the durable-state check -------------------------------------------------------------------------


_TERMINAL_STATES = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


def _normalized(start_offset: int, batches: Sequence[StateBatch]) -> tuple[int, list[tuple[int, int, int, int]]]:
    """A share-partition state in the form a leader would load it in: runs below the start offset
    dropped, leading terminal runs folded into the start offset, never-delivered available runs
    (AVAILABLE with delivery count 0, the same as no state at all) dropped."""
    runs = sorted((first, last, state, count) for first, last, state, count in batches if last >= start_offset)
    runs = [(max(first, start_offset), last, state, count) for first, last, state, count in runs]
    while runs and runs[0][0] == start_offset and runs[0][2] in _TERMINAL_STATES:
        start_offset = runs.pop(0)[1] + 1
    return start_offset, [run for run in runs if not (run[2] == RecordState.AVAILABLE and run[3] == 0)]


async def check_durable_state(data_dir: str | os.PathLike, group_id: str, topic_id: uuid.UUID,
                              leaders: dict[int, LeaderState]) -> list[str]:
    """Open the state log in `data_dir` afresh (the persister's own recovery: scan and replay) and
    compare each share-partition's durable state with what its leader held; returns the differences.

    Equality is up to representation: the persisted start offset may trail the leader's over terminal
    records, and runs of never-delivered records may or may not be persisted.
    """
    from persister import LocalPersister
    from prometheus_client import CollectorRegistry

    problems: list[str] = []
    persister = await LocalPersister.open(data_dir, fsync=False, metrics_registry=CollectorRegistry())
    try:
        for partition, leader in sorted(leaders.items()):
            state = persister.state_of(group_id, topic_id, partition)
            if state is None:
                if leader.loaded:  # else no member ever fetched from it: nothing to be durable yet
                    problems.append(f"partition {partition}: no durable state")
                continue
            durable = _normalized(state.start_offset, state.state_batches)
            held = _normalized(leader.start_offset, leader.state_batches)
            if durable != held:
                problems.append(f"partition {partition}: durable start {durable[0]} runs {durable[1][:4]}... "
                                f"!= leader start {held[0]} runs {held[1][:4]}...")
    finally:
        await persister.close()
    return problems


# -- the audit ---------------------------------------------------------------------------------------


def audit_state_log(summary: AuditedSummary, data_dir: str, *, master: str, spark, out_dir, print_fn,
                    options: dict[str, Any]) -> None:
    """Run the audit of the state log in `data_dir` with the settings it was written with (`options`,
    where `run_audit` takes them); the outcome, or why the audit could not run, goes into `summary`."""
    print_fn("")
    print_fn(f"Audit of the state log in {data_dir} (Spark, master {master})")
    try:
        from ..audit import AuditEnvironmentError, run_audit
    except ImportError as exc:
        summary.audit_error = (f"the audit cannot run: {exc}. It needs PySpark (`pip install pyspark`) and a Java "
                               "runtime 17+ (e.g. `apt-get install openjdk-17-jre-headless`); "
                               "or run the demo with --no-audit")
        print_fn(f"audit: {summary.audit_error}")
        return
    # Audit with the settings the log was written with, where the audit takes them.
    accepted = inspect.signature(run_audit).parameters
    extra: dict[str, Any] = {name: value for name, value in options.items() if name in accepted}
    try:
        result = run_audit(data_dir, master=master, out_dir=out_dir, spark=spark, print_fn=print_fn, **extra)
    except AuditEnvironmentError as exc:
        summary.audit_error = str(exc)
        print_fn(f"audit: cannot run: {exc}")
        return
    summary.audit = result  # run_audit printed its summary and verdict
