"""The `sharegroup` command line (layer 4). Exit codes: 0 ok, 1 audit violations, 2 usage or environment;
`share-groups` and `configs` exit as Kafka's tools do (1 on any usage error or failed request).

Subcommands import what they need only when they run, so `sharegroup --help` works without a native
build, PySpark or Java.
"""

from __future__ import annotations

import argparse
import sys

EXIT_OK = 0
EXIT_VIOLATIONS = 1
EXIT_USAGE = 2
EXIT_TOOL_USAGE = 1  # share-groups and configs exit as kafka-share-groups.sh / kafka-configs.sh do
_KAFKA_TOOLS = ("share-groups", "configs")

_EPILOG = "exit status: 0 ok, 1 the audit found violations, 2 usage or environment errors (missing Java, ...)"


def _int_in(lo: int, hi: int):
    def parse(text: str) -> int:
        try:
            value = int(text.replace("_", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be in [{lo}, {hi}], got {value}")
        return value

    return parse


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sharegroup",
        description="Share-group delivery engine: the broker-side half of Kafka share groups (KIP-932).",
        epilog=_EPILOG,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser(
        "demo",
        help="run share consumers against the engine with a durable state log, then audit the log",
        description="Start `sharegroup serve` on a free port with its data in DIR, produce orders with a real "
        "confluent_kafka Producer (acks=all, idempotent) and consume them with real confluent_kafka ShareConsumers in "
        "child processes: they accept most, release some (transient failures), reject malformed ones and keep "
        "releasing poison records until the broker archives them at the delivery count limit; one consumer is "
        "killed (SIGKILL) mid-batch and its records are redelivered to the others. A progress bar shows while it "
        "runs; then a summary (end-to-end records/s, deliveries, redeliveries, archived by reason), a check that "
        "every record ended as the consumers' acknowledgements imply and that the durable state read back from "
        "disk agrees, and the Spark audit of the broker's share-state log (needs PySpark and Java 17+; skip it "
        "with --no-audit). --simulated runs the in-process simulation instead: simulated consumers on simulated "
        "time, fast, and the same seed gives the same run (no Kafka client needed).",
        epilog=_EPILOG,
    )
    demo.add_argument("--data", metavar="DIR", default="./sharegroup-data",
                      help="data directory (the broker's, or with --simulated the state log's; default: "
                      "%(default)s); an earlier demo's data there is wiped unless --keep")
    demo.add_argument("--partitions", type=_int_in(1, 1000), default=3, metavar="N",
                      help="partitions of the topic (default: %(default)s)")
    demo.add_argument("--consumers", type=_int_in(1, 200), default=4, metavar="N",
                      help="share consumers in the group (default: %(default)s)")
    demo.add_argument("--records", type=_int_in(1, 10**9), default=None, metavar="N",
                      help="records to produce (default: 50000; 100000 with --simulated)")
    demo.add_argument("--duration", type=_seconds, default=None, metavar="SECONDS",
                      help="wall-clock limit of the run: consumers stop then, and records not yet done stay in "
                      "flight (default: 60; 30 with --simulated)")
    demo.add_argument("--seed", type=_int_in(0, 2**63 - 1), default=932, metavar="N",
                      help="seed of the workload: which records are poison, malformed, released, who crashes "
                      "(default: %(default)s)")
    demo.add_argument("--metrics-port", type=_int_in(0, 65535), default=None, metavar="PORT",
                      help="serve Prometheus metrics on http://127.0.0.1:PORT/metrics while the demo runs "
                      "(0: any free port)")
    demo.add_argument("--keep", action="store_true",
                      help="add to the state log in DIR instead of starting fresh (each run uses a new topic)")
    demo.add_argument("--no-audit", dest="audit", action="store_false",
                      help="skip the Spark audit of the state log")
    demo.add_argument("--master", default="local[2]", metavar="URL",
                      help="Spark master of the audit (default: %(default)s)")
    demo.add_argument("--simulated", action="store_true",
                      help="run the in-process simulation instead of the broker and real clients: simulated "
                      "consumers on simulated time, deterministic for a seed")
    demo.add_argument("--share-state", metavar="URL", default=None,
                      help="serve keeps its share state in a Kafka topic, kafka://host:port[/topic], instead of "
                      "under DIR; the checks and the audit read a copy of that topic (DIR/share-state-copy); not "
                      "with --simulated")
    demo.add_argument("--walkthrough", action="store_true",
                      help="instead, walk through KIP-932's worked example on one share-partition, step by step "
                      "(the other options are ignored)")
    serve = sub.add_parser(
        "serve",
        help="run a Kafka-protocol broker that real Kafka producers, admin clients and share consumers use",
        description="Serve the Kafka wire protocol on HOST:PORT as a one-node cluster (controller, group "
        "coordinator and leader of every partition) with its topics stored durably in DIR. Broker configs use "
        "Kafka's names, defaults and bounds (--config server.properties, --override KEY=VALUE); a real Kafka "
        "config serve does not use is accepted with a warning, an unknown key or a value out of bounds is "
        "refused (exit 2). Prints one line when ready: 'sharegroup serve: listening on HOST:PORT (node N, "
        "data DIR)'. SIGTERM or SIGINT stops it cleanly (exit 0). Listeners, TLS and SASL take Kafka's configs "
        "(--override listeners=SASL_SSL://127.0.0.1:9093,... ssl.keystore.*, sasl.enabled.mechanisms; "
        "docs/security.md); each listener is then printed as 'sharegroup serve: listener NAME (PROTOCOL) on "
        "HOST:PORT' before the readiness line.",
        epilog=_EPILOG,
    )
    from .server.serve import add_arguments as _serve_arguments

    _serve_arguments(serve)
    audit = sub.add_parser(
        "audit",
        help="audit a state log with Spark: replay every share-partition's checkpoints and deltas, check them",
        description="Read the segment files of a state log with PySpark, replay each share-partition's "
        "checkpoint/delta stream in log order and check the invariants (CRC and framing, epochs, start "
        "offsets, sorted disjoint batches, delivery counts, terminal records, deltas between checkpoints). "
        "Prints a summary, writes a JSON report and a picture. Needs PySpark and Java 17+.",
        epilog=_EPILOG,
    )
    share_groups = sub.add_parser(
        "share-groups",
        help="list, describe, reset offsets of and delete share groups on any broker (kafka-share-groups.sh)",
        description="kafka-share-groups.sh over the Kafka wire protocol: exactly one of --list, --describe, "
        "--reset-offsets, --delete-offsets, --delete, with its option checks and texts. Exit 0 when the action "
        "ran, 1 on a usage error or a failed request.",
    )
    from .admin.share_groups import add_arguments as _share_groups_arguments

    _share_groups_arguments(share_groups)
    configs = sub.add_parser(
        "configs",
        help="describe or alter topic, broker and group configs on any broker (kafka-configs.sh)",
        description="kafka-configs.sh over the Kafka wire protocol for --entity-type topics, brokers, groups or "
        "users, with its option checks and texts. Exit 0 on success, 1 on a usage error or a failed request.",
    )
    from .admin.configs import add_arguments as _configs_arguments

    _configs_arguments(configs)
    audit.add_argument("state_log_dir", metavar="STATE_LOG_DIR", help="the state log directory (or a URI Spark reads)")
    audit.add_argument("--master", default="local[2]", metavar="URL", help="Spark master (default: %(default)s)")
    audit.add_argument("--out", metavar="DIR", help="where to write the report and the picture")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "audit":
        return _audit(argv[1:])
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2): argparse has printed why
        code = exc.code if isinstance(exc.code, int) else EXIT_USAGE
        if code == EXIT_USAGE and argv and argv[0] in _KAFKA_TOOLS:
            return EXIT_TOOL_USAGE  # Kafka's tools exit 1 on a usage error (an unknown option, a missing value)
        return code
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        if args.command == "demo":
            return _demo(args)
        if args.command == "serve":
            from .server.serve import run as run_serve

            return run_serve(args)
        if args.command == "share-groups":
            from .admin.share_groups import run as run_share_groups

            return run_share_groups(args)
        if args.command == "configs":
            from .admin.configs import run as run_configs

            return run_configs(args)
    except ImportError as exc:  # e.g. the native tracker is not built
        print(f"sharegroup: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("sharegroup: interrupted", file=sys.stderr)
        return 130
    parser.error(f"unknown command {args.command!r}")
    return EXIT_USAGE


def _demo(args: argparse.Namespace) -> int:
    if args.walkthrough:
        import asyncio

        from persister import InMemoryPersister  # the edge picks the implementation

        from .clock import ManualClock
        from .demo import run_walkthrough

        clock = ManualClock(0)
        asyncio.run(run_walkthrough(InMemoryPersister(clock=clock), clock))
        return 0
    if args.share_state is not None:
        from persister.kafka_persister import parse_kafka_url

        problem = "--share-state is for the live demo, not with --simulated" if args.simulated else None
        try:
            parse_kafka_url(args.share_state)
        except ValueError as exc:
            problem = f"--share-state: {exc}"
        if problem is not None:
            print(f"sharegroup demo: {problem}", file=sys.stderr)
            return EXIT_USAGE
    if not args.simulated:
        return _live_demo(args)
    import asyncio

    from persister import CorruptLogError, LogLockedError

    from .demo import DemoError, run_demo

    try:
        summary = asyncio.run(
            run_demo(
                data_dir=args.data,
                partitions=args.partitions,
                consumers=args.consumers,
                records=100_000 if args.records is None else args.records,
                duration_s=30.0 if args.duration is None else args.duration,
                seed=args.seed,
                metrics_port=args.metrics_port,
                keep=args.keep,
                audit=args.audit,
                master=args.master,
            )
        )
    except (DemoError, LogLockedError, CorruptLogError, OSError) as exc:
        print(f"sharegroup demo: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return summary.exit_code


def _live_demo(args: argparse.Namespace) -> int:
    from persister import LogLockedError

    from .demo import DemoError, run_live_demo

    try:
        summary = run_live_demo(
            data_dir=args.data, partitions=args.partitions, consumers=args.consumers,
            records=50_000 if args.records is None else args.records,
            duration_s=60.0 if args.duration is None else args.duration,
            seed=args.seed, metrics_port=args.metrics_port, keep=args.keep, audit=args.audit, master=args.master,
            share_state=args.share_state,
        )
    except (DemoError, LogLockedError, OSError) as exc:
        print(f"sharegroup demo: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return summary.exit_code


def _audit(argv: list[str]) -> int:
    """Delegate to the audit's own command line; without PySpark installed, say what to install."""
    try:
        from .audit import main as audit_main
    except ImportError as exc:
        if any(a in ("-h", "--help") for a in argv):
            try:
                build_parser().parse_args(["audit", "--help"])
            except SystemExit:  # the help is printed
                return EXIT_OK
        print(f"sharegroup audit: cannot load the audit ({exc}); it needs PySpark (pip install pyspark) "
              "and a Java runtime 17+", file=sys.stderr)
        return EXIT_USAGE
    try:
        return int(audit_main(argv))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except KeyboardInterrupt:
        print("sharegroup: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
