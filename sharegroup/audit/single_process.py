"""The audit in one Python process, without Spark: the benchmark's baseline and the tests' cross-check.

It runs the very same steps as the Spark job (tasks.py: split the segment files by key, then decode,
replay and check each key; decode.judge_segments for the log as a whole); only the transport differs:
files are read from the local file system and keys are grouped in a dict instead of a shuffle.
"""

from __future__ import annotations

import os
import time

from .decode import START_OFFSET_FILE, SegmentSplitter, judge_segments, parse_segment_name, plan_log
from .result import AuditEnvironmentError, AuditResult, assemble
from .rules import AuditOptions
from .tasks import audit_chunks

__all__ = ["replay_log", "list_local_log"]


def list_local_log(log_dir: str) -> tuple[list[tuple[int, str]], bytes | None]:
    """The segment files [(base_offset, path)] of a local state-log directory and the content of its
    log-start-offset file (None when absent). Raises AuditEnvironmentError for a missing directory."""
    if not os.path.isdir(log_dir):
        raise AuditEnvironmentError(f"no such state log directory: {log_dir}")
    listed = []
    for name in os.listdir(log_dir):
        base = parse_segment_name(name)
        if base is not None:
            listed.append((base, os.path.join(log_dir, name)))
    listed.sort()
    try:
        with open(os.path.join(log_dir, START_OFFSET_FILE), "rb") as f:
            start_content = f.read(4096)
    except FileNotFoundError:
        start_content = None
    return listed, start_content


def replay_log(state_log_dir: str | os.PathLike, options: AuditOptions | None = None) -> AuditResult:
    """Audit a local state log in this process: same rules, same result as the Spark job.

    Runtime: O(bytes) to decode plus O(b log b) per record for states of b batches (the combiner);
    memory holds every key's raw frames (about the log's size) until its key is replayed.
    """
    options = AuditOptions() if options is None else options
    log_dir = os.fspath(state_log_dir)
    started = time.perf_counter()
    listed, start_content = list_local_log(log_dir)
    if not listed:
        raise AuditEnvironmentError(f"no state log segments (*.log) in {log_dir}: is it a state log directory?")
    plan = plan_log(listed, start_content)
    chunks_by_key: dict = {}
    scans = {}
    for base_offset, path in plan.live:
        with open(path, "rb") as f:
            content = f.read()
        splitter = SegmentSplitter(path, base_offset, content, plan.log_start_offset)
        for chunk in splitter.chunks():
            for route_key, key_chunk in chunk.items():
                chunks_by_key.setdefault(route_key, []).append(key_chunk)
        scans[path] = splitter.scan
    key_results = [
        audit_chunks(route_key, chunks, options, plan.log_start_offset) for route_key, chunks in chunks_by_key.items()
    ]
    judgement = judge_segments(
        plan.live,
        scans,
        plan.log_start_offset,
        plan.start_offset_error,
        os.path.join(log_dir, START_OFFSET_FILE),
    )
    result = assemble(
        log_dir=log_dir,
        engine="python",
        master=None,
        options=options,
        judgement=judgement,
        scans=list(scans.values()),
        key_results=key_results,
    )
    result.elapsed_seconds = time.perf_counter() - started
    return result
