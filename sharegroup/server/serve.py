"""`sharegroup serve`: parse the options and broker configs, open the data directory, serve until a signal.

    sharegroup serve [--data DIR] [--host 127.0.0.1] [--port 9092] [--node-id 1]
                     [--config server.properties] [--override KEY=VALUE ...] [--group-config KEY=VALUE ...]
                     [--metrics-port PORT] [--add-scram 'SCRAM-SHA-256=[name=alice,password=...]' ...]

When it is ready it prints exactly one line on stdout,
`sharegroup serve: listening on HOST:PORT (node N, data DIR)`, and flushes it. With `listeners` set
(`--override listeners=SASL_SSL://127.0.0.1:0,...`) it first prints one line per listener,
`sharegroup serve: listener NAME (PROTOCOL) on HOST:PORT`, and the readiness line names the first.
`--add-scram` sets a SCRAM credential in `DIR/security` before the broker starts (kafka-storage's syntax).
SIGTERM and SIGINT stop it cleanly (connections closed, the store closed so pending writes are durable;
exit 0). A bad option, an unknown broker config, a value outside Kafka's bounds or a wrong security
setting is refused before anything is opened (exit 2).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

from .broker_config import ServeConfig, parse_properties, split_assignment
from .log_output import LogOutput

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9092

__all__ = ["add_arguments", "event_loop_factory", "open_share_services", "open_store", "open_transaction_services", "run", "load_config"]

EXIT_OK = 0
EXIT_USAGE = 2


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port must be in [0, 65535], got {value}")
    return value


def _node_id(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a node id: {text!r}") from None
    if not 0 <= value <= 2**31 - 1:
        raise argparse.ArgumentTypeError(f"a node id must be in [0, 2147483647], got {value}")
    return value


def _share_state_url(text: str) -> str:
    from persister.kafka_persister import parse_kafka_url

    try:
        parse_kafka_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", metavar="DIR", default="./sharegroup-data",
                        help="data directory: topic logs, share state, group records (default: %(default)s)")
    parser.add_argument("--host", default=None, help="address of the PLAINTEXT listener; ignored (with a warning) "
                        f"when the listeners config is set (default: {DEFAULT_HOST})")
    parser.add_argument("--port", type=_port, default=None, help="port to listen on; 0 binds a free port; ignored "
                        f"(with a warning) when the listeners config is set (default: {DEFAULT_PORT})")
    parser.add_argument("--node-id", type=_node_id, default=1, metavar="N", help="this broker's node id (default: %(default)s)")
    parser.add_argument("--config", metavar="FILE", help="a Kafka server.properties to read broker configs from")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="set one Kafka broker config (e.g. num.partitions=3); repeatable; wins over --config")
    parser.add_argument("--group-config", action="append", default=[], metavar="KEY=VALUE",
                        help="default of a share-group config for every group (share.record.lock.duration.ms, "
                        "share.delivery.count.limit, share.auto.offset.reset, share.isolation.level, "
                        "share.session.timeout.ms, share.heartbeat.interval.ms); repeatable")
    parser.add_argument("--share-state", metavar="URL", default=None, type=_share_state_url,
                        help="keep share state in a Kafka topic: kafka://host:port[/topic] (default: under --data)")
    parser.add_argument("--add-scram", action="append", default=[], metavar="'MECHANISM=[name=U,password=P]'",
                        help="set a SCRAM credential at start (SCRAM-SHA-256 or SCRAM-SHA-512; optional "
                        "iterations=N, 4096..16384); repeatable; only the salted keys are stored")
    parser.add_argument("--metrics-port", type=_port, default=None, metavar="PORT",
                        help="serve Prometheus metrics on http://127.0.0.1:PORT/metrics (0: any free port)")


def load_config(args: argparse.Namespace) -> ServeConfig:
    """The validated broker config of these options; `ValueError` names the offending key or file."""
    properties: dict[str, str] = {}
    if args.config:
        try:
            text = Path(args.config).read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read --config {args.config}: {exc.strerror or exc}") from None
        properties = parse_properties(text)
    overrides = [split_assignment(item) for item in args.override]
    group_configs = [split_assignment(item) for item in args.group_config]
    return ServeConfig.build(properties, overrides, group_configs)


async def open_store(data_dir: Path | str, config: ServeConfig, *, clock: Any = None) -> Any:
    """Open the durable topic store of `data_dir` with the broker's (already validated) log configs;
    `clock` (default: the system clock) is the time appends and retention read (tests pass a ManualClock)."""
    from ..topics.topic_store import LogConfig, TopicStore

    log_config = LogConfig(
        segment_bytes=config["log.segment.bytes"],
        retention_ms=config.log_retention_ms,
        retention_bytes=config["log.retention.bytes"],
        max_message_bytes=config["message.max.bytes"],
        num_partitions=config["num.partitions"],
        auto_create_topics_enable=config["auto.create.topics.enable"],
        message_timestamp_before_max_ms=config["log.message.timestamp.before.max.ms"],
        message_timestamp_after_max_ms=config["log.message.timestamp.after.max.ms"],
    )
    return await TopicStore.open(data_dir, log_config=log_config, clock=clock)


async def open_share_services(data_dir: Path | str, config: ServeConfig, store: Any,
                              share_state: str | None = None, *, clock: Any = None) -> Any:
    """The persister (with its maintenance jobs), group coordinator and SharePartitionManager of
    `data_dir`, over `store`; `clock` (default: the system clock) times the share state."""
    from .share_services import ShareServices

    return await ShareServices.open(data_dir, config, store, share_state, clock=clock)


async def open_transaction_services(data_dir: Path | str, config: ServeConfig, store: Any, share: Any = None,
                                    *, clock: Any = None) -> Any:
    """The transaction coordinator of `data_dir` (its state under DIR/transactions), over `store` and the
    group coordinator of `share`; transactions a crash left prepared are completed before it returns."""
    from .transactions import TransactionServices

    return await TransactionServices.open(data_dir, config, store, share, clock=clock)


def load_security(args: argparse.Namespace, config: ServeConfig) -> Any:
    """Listeners, TLS contexts and SASL settings (`BrokerSecurity`), and the parsed `--add-scram` values;
    `ValueError` names the wrong setting."""
    from .security.broker_security import BrokerSecurity
    from .security.scram_credentials import parse_add_scram

    scram = [parse_add_scram(text) for text in getattr(args, "add_scram", [])]
    return BrokerSecurity.from_config(config, None, args.host, args.port), scram


def load_quotas(config: ServeConfig, security: Any) -> Any:
    """The connection quotas (`ConnectionQuotas`) of every listener; `ValueError` when a host of
    `max.connections.per.ip.overrides` does not resolve."""
    from .connection_quotas import ConnectionQuotas

    return ConnectionQuotas.from_config(config, (listener.name for listener in security.listeners))


async def _serve(args: argparse.Namespace, config: ServeConfig, security: Any = None, quotas: Any = None) -> int:
    from .broker import Broker
    from .security.authorizer import authorizer_for
    from .security.broker_security import SECURITY_DIR
    from .security.scram_credentials import ScramCredentialStore

    data_dir = Path(args.data)
    data_dir.mkdir(parents=True, exist_ok=True)
    authorizer = authorizer_for(config, data_dir)  # a bad ACL file stops the start here (ValueError, exit 2)
    if security is not None:
        security, scram = security
        try:
            security.store = ScramCredentialStore(data_dir / SECURITY_DIR)
        except ValueError as exc:
            print(f"sharegroup serve: {exc}", file=sys.stderr)
            return EXIT_USAGE
        if scram:
            security.store.apply(scram, [])
    store = await open_store(data_dir, config)
    try:
        share = await open_share_services(data_dir, config, store, args.share_state)
    except BaseException:
        await store.close()
        raise
    try:
        transactions = await open_transaction_services(data_dir, config, store, share)
    except BaseException:
        await share.close()
        await store.close()
        raise
    broker = Broker(config, store, host=args.host, port=args.port, node_id=args.node_id, data_dir=data_dir,
                    share=share, authorizer=authorizer, security=security, quotas=quotas, transactions=transactions)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    metrics = None
    try:
        await share.start()  # the lock timer and member expiry run before the first request comes in
        await transactions.start()  # transaction timeouts and transactional-id expiry
        await broker.start()
        if args.metrics_port is not None:
            from ..metrics import bind_manager_metrics, serve_metrics

            bind_manager_metrics(share.manager)  # Kafka's share metric names, read at scrape time
            metrics = serve_metrics(args.metrics_port)
            print(f"sharegroup serve: metrics on {metrics.url}", file=sys.stderr, flush=True)
        if config["listeners"] is not None:
            for listener in broker.security.listeners:
                host, port = broker.bound[listener.name]
                print(f"sharegroup serve: listener {listener.name} ({listener.protocol}) on {host}:{port}", flush=True)
        print(f"sharegroup serve: listening on {broker.host}:{broker.port} "
              f"(node {broker.node_id}, data {data_dir})", flush=True)
        await stop.wait()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        if metrics is not None:
            metrics.close()
        await broker.close()
    return EXIT_OK


def event_loop_factory() -> Any:
    """uvloop's loop when it is installed (the optional extra `fast`), else None: asyncio's default loop.
    SHAREGROUP_EVENT_LOOP=asyncio keeps the default loop even with uvloop installed."""
    if os.environ.get("SHAREGROUP_EVENT_LOOP", "") == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(args: argparse.Namespace) -> int:
    """Run `sharegroup serve` with parsed arguments; returns the exit status."""
    try:
        config = load_config(args)
    except ValueError as exc:
        print(f"sharegroup serve: {exc}", file=sys.stderr)
        return EXIT_USAGE
    given = [f"--{name}" for name in ("host", "port") if getattr(args, name, None) is not None]
    if given and config["listeners"] is not None:
        print(f"sharegroup serve: WARNING {' and '.join(given)} ignored: the listeners config "
              f"({config['listeners']}) sets every listener", file=sys.stderr)
    args.host = DEFAULT_HOST if getattr(args, "host", None) is None else args.host
    args.port = DEFAULT_PORT if getattr(args, "port", None) is None else args.port
    try:
        security = load_security(args, config)
        quotas = load_quotas(config, security[0])
    except ValueError as exc:
        print(f"sharegroup serve: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for line in config.warnings:
        print(line, file=sys.stderr)
    # Through a queue and a writer thread: the event loop never waits for stderr (see log_output).
    log_output = LogOutput(sys.stderr, logging.WARNING, "sharegroup serve: %(levelname)s %(name)s: %(message)s")
    log_output.start()
    try:
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            return runner.run(_serve(args, config, security, quotas))
    except (OSError, ValueError) as exc:  # the port is taken, the data directory is not writable, a bad ACL file, ...
        log_output.stop()
        print(f"sharegroup serve: {exc}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        log_output.stop()
