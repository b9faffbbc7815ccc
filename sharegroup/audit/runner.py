"""`run_audit`: audit a state log (Spark by default), print the summary, write report.json and audit.png."""

from __future__ import annotations

import os
import re
import time
from typing import Callable

from .decode import display_path
from .result import AuditEnvironmentError, AuditResult
from .rules import DELIVERY_COUNT_LIMIT_DEFAULT, RECORDS_PER_SNAPSHOT_DEFAULT, AuditOptions

__all__ = ["run_audit", "DEFAULT_OUT_DIR", "ENGINES"]

DEFAULT_OUT_DIR = "audit-out"
ENGINES = ("spark", "python")
_URI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _local_dir(log_dir: str) -> str | None:
    """The local path of `log_dir` if it names the local file system (a plain path or a file: URI)."""
    if log_dir.startswith("file:"):
        return display_path(log_dir)
    return None if _URI_SCHEME.match(log_dir) else log_dir


def _check_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise AuditEnvironmentError("the audit picture needs matplotlib: pip install matplotlib") from None


def run_audit(
    state_log_dir: str | os.PathLike,
    *,
    master: str = "local[2]",
    out_dir: str | os.PathLike | None = None,
    spark=None,
    print_fn: Callable[[str], object] | None = print,
    engine: str = "spark",
    delivery_count_limit: int = DELIVERY_COUNT_LIMIT_DEFAULT,
    snapshot_update_records_per_snapshot: int = RECORDS_PER_SNAPSHOT_DEFAULT,
    spark_conf: dict[str, str] | None = None,
    write_outputs: bool = True,
) -> AuditResult:
    """Audit the state log in `state_log_dir` and return what it found.

    engine "spark" (default) runs the PySpark job on `spark` if given (used as is, never stopped), else
    on a session for `master` that it starts with the small-machine settings plus `spark_conf` and stops
    afterwards (an already running SparkContext in this process is joined, not stopped). engine "python"
    runs the same rules in this process (no Java needed; local directories only).

    The summary table goes to `print_fn` (None: silent). With `write_outputs`, report.json and audit.png
    are written to `out_dir` (default ./audit-out). Raises AuditEnvironmentError when the audit cannot
    run (no Java, no PySpark or matplotlib, no such directory, no segment files) and ValueError for
    invalid options.
    """
    options = AuditOptions(delivery_count_limit, snapshot_update_records_per_snapshot)
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, not {engine!r}")
    log_dir = given_dir = os.fspath(state_log_dir)
    if log_dir.startswith("kafka://"):  # a state log in a Kafka topic: audit a read-only copy of it
        log_dir = _copy_kafka_log(log_dir, out_dir)
    local = _local_dir(log_dir)
    if local is not None and not os.path.isdir(local):
        raise AuditEnvironmentError(f"no such state log directory: {log_dir}")
    if write_outputs:
        _check_matplotlib()
    if engine == "python":
        if local is None:
            raise AuditEnvironmentError(f"the python engine reads local directories only, not {log_dir}")
        from .single_process import replay_log

        result = replay_log(local, options)
    else:
        result = _run_on_spark(log_dir, master, spark, spark_conf, options, print_fn)
    # Reports and pictures name the state log as the user gave it (a relative path stays relative, a
    # kafka:// URL is not replaced by the copy's directory), never a path of the machine it ran on.
    result.log_dir = display_path(given_dir)
    if write_outputs:
        from .report import draw_picture, write_report

        out = os.fspath(out_dir) if out_dir is not None else DEFAULT_OUT_DIR
        result.picture_path = draw_picture(result, out)
        result.report_path = write_report(result, out)
    if print_fn is not None:
        from .report import format_summary

        print_fn(format_summary(result))
        if result.report_path:
            print_fn(f"report: {result.report_path}   picture: {result.picture_path}")
    return result


def _copy_kafka_log(url: str, out_dir) -> str:
    """Copy partition 0 of the topic in `kafka://host:port/topic` into `<out>/state-log` (a segment
    directory) and return that path; the Kafka log is only read."""
    from persister.kafka_state_log import DEFAULT_STATE_TOPIC, export_to_segment_dir
    from persister.kafka_persister import parse_kafka_url

    try:
        servers, topic = parse_kafka_url(url)
    except ValueError as exc:
        raise AuditEnvironmentError(str(exc)) from None
    copy = os.path.join(os.fspath(out_dir) if out_dir is not None else DEFAULT_OUT_DIR, "state-log")
    if os.path.isdir(copy):
        import shutil

        shutil.rmtree(copy)
    export_to_segment_dir(servers, topic or DEFAULT_STATE_TOPIC, 0, copy)
    return copy


def _run_on_spark(log_dir, master, spark, spark_conf, options, print_fn) -> AuditResult:
    from .spark_job import build_session, run_spark_audit

    owned = False
    session_seconds = 0.0
    if spark is None:
        try:
            from pyspark import SparkContext
            from pyspark.sql import SparkSession
        except ImportError:
            raise AuditEnvironmentError(
                "the Spark audit needs PySpark: pip install 'pyspark>=4.0' (or run with --engine python)"
            ) from None
        if SparkContext._active_spark_context is not None:
            # Join the context this process already runs (its configuration stays); never stop it.
            spark = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
            if spark.sparkContext.master != master and print_fn is not None:
                print_fn(f"audit: using the running Spark context ({spark.sparkContext.master}), not {master}")
        else:
            owned = True
            if print_fn is not None:
                print_fn(f"audit: starting Spark ({master}) ...")
            started = time.perf_counter()
            spark = build_session(master, spark_conf)
            session_seconds = time.perf_counter() - started
    try:
        result = run_spark_audit(spark, log_dir, options)
    finally:
        if owned:
            spark.stop()
    result.session_seconds = session_seconds
    return result
