"""`sharegroup audit STATE_LOG_DIR`: exit 0 when every invariant holds, 1 on violations, 2 when the audit
cannot run (usage, missing Java/PySpark/matplotlib, no such directory), 3 on an unexpected failure.

`sharegroup/cli.py` embeds it with `configure_parser(subparser)` and `run_from_args(args)`; `main(argv)`
and `python -m sharegroup.audit` run it alone.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
import traceback

from .runner import DEFAULT_OUT_DIR, ENGINES, run_audit
from .result import AuditEnvironmentError
from .rules import DELIVERY_COUNT_LIMIT_DEFAULT, RECORDS_PER_SNAPSHOT_DEFAULT, RULE_DESCRIPTIONS, AuditOptions

__all__ = ["configure_parser", "run_from_args", "main", "DESCRIPTION", "EXIT_OK", "EXIT_VIOLATIONS", "EXIT_ENVIRONMENT"]

EXIT_OK = 0
EXIT_VIOLATIONS = 1
EXIT_ENVIRONMENT = 2
EXIT_INTERNAL = 3

DESCRIPTION = (
    "Audit a share-coordinator state log with Spark: decode every segment file, replay each "
    "share-partition's checkpoint/delta stream in log order exactly as the coordinator's recovery does, "
    "and check the invariants listed below. Prints a summary table and writes report.json and audit.png "
    "(delivery counts per share-partition in the final states and as written, start-offset progress) to "
    "--out. Exit status: 0 every invariant holds, 1 violations found, 2 the audit cannot run (bad usage, "
    "no such directory, Java or PySpark missing), 3 unexpected failure."
)


def _epilog() -> str:
    lines = ["invariants:"]
    for rule, text in RULE_DESCRIPTIONS.items():
        lines.append(textwrap.fill(text, 100, initial_indent=f"  {str(rule):<28}", subsequent_indent=" " * 30))
    lines.append("")
    lines.append(
        textwrap.fill(
            "on a cluster: sharegroup audit hdfs:///state-log --master spark://host:7077 (any directory every "
            "executor can read; executors need pyspark, msgpack, crc32c and prometheus-client, the audit ships "
            "its own code)",
            100,
        )
    )
    return "\n".join(lines)


def _int_arg(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def _conf_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, not {text!r}")
    return key, value


def configure_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the audit's arguments to `parser` (a fresh parser or a `sharegroup audit` subparser)."""
    parser.description = textwrap.fill(DESCRIPTION, 100)
    parser.epilog = _epilog()
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("state_log_dir", metavar="STATE_LOG_DIR", help="the state log directory (segment files), or kafka://host:port/topic (partition 0 of a state topic)")
    parser.add_argument(
        "--master",
        default="local[2]",
        help="Spark master URL (default: local[2]; e.g. spark://host:7077 for a cluster)",
    )
    parser.add_argument(
        "--out",
        default=DEFAULT_OUT_DIR,
        metavar="DIR",
        help=f"where report.json and audit.png go (default: ./{DEFAULT_OUT_DIR})",
    )
    parser.add_argument(
        "--delivery-count-limit",
        type=_int_arg,
        default=DELIVERY_COUNT_LIMIT_DEFAULT,
        metavar="N",
        help="the share group's group.share.delivery.count.limit; delivery counts above it are violations "
        f"(default: {DELIVERY_COUNT_LIMIT_DEFAULT}, Kafka's maximum, so every valid configuration passes)",
    )
    parser.add_argument(
        "--snapshot-update-records-per-snapshot",
        type=_int_arg,
        default=RECORDS_PER_SNAPSHOT_DEFAULT,
        metavar="N",
        help="the coordinator's share.coordinator.snapshot.update.records.per.snapshot: the most deltas allowed "
        f"between two checkpoints of a key (default: {RECORDS_PER_SNAPSHOT_DEFAULT})",
    )
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="spark",
        help="spark (default) or python: the same rules in this process, no Java needed (local directories only)",
    )
    parser.add_argument(
        "--conf",
        type=_conf_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark configuration, repeatable (e.g. --conf spark.executor.memory=2g)",
    )
    return parser


def run_from_args(args: argparse.Namespace, *, print_fn=print) -> int:
    """Run the audit for parsed arguments; return the exit status."""
    try:
        AuditOptions(args.delivery_count_limit, args.snapshot_update_records_per_snapshot)
    except ValueError as exc:
        print(f"sharegroup audit: {exc}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    try:
        result = run_audit(
            args.state_log_dir,
            master=args.master,
            out_dir=args.out,
            engine=args.engine,
            delivery_count_limit=args.delivery_count_limit,
            snapshot_update_records_per_snapshot=args.snapshot_update_records_per_snapshot,
            spark_conf=dict(args.conf),
            print_fn=print_fn,
        )
    except AuditEnvironmentError as exc:
        print(f"sharegroup audit: {exc}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    except Exception:  # an unexpected failure: not a verdict on the log
        traceback.print_exc()
        print("sharegroup audit: the audit failed unexpectedly (see above)", file=sys.stderr)
        return EXIT_INTERNAL
    return EXIT_OK if result.ok else EXIT_VIOLATIONS


def main(argv: list[str] | None = None) -> int:
    """`sharegroup audit ...` on its own: parse `argv` (default sys.argv[1:]) and run."""
    parser = configure_parser(argparse.ArgumentParser(prog="sharegroup audit"))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on bad usage and 0 after --help
        return exc.code if isinstance(exc.code, int) else EXIT_ENVIRONMENT
    return run_from_args(args)
