"""`sharegroup configs`: kafka-configs.sh for topics, brokers and groups, over the wire.

`--describe` asks as kafka-configs.sh asks (DescribeConfigs with IncludeSynonyms) and prints what it
prints: "Dynamic configs for topic t are:" then, sorted by name, one
`  name=value sensitive=bool synonyms={SOURCE:name=value, SOURCE:name=value}` line per config, its synonyms
as the broker returned them in its order (`null` for a null value, `{}` when there are none), SOURCE being
the Java client's ConfigSource name (DYNAMIC_TOPIC_CONFIG, DYNAMIC_GROUP_CONFIG, STATIC_BROKER_CONFIG,
DEFAULT_CONFIG, ...). Without `--all` only the configs set dynamically on the entity are listed, as
kafka-configs.sh filters them: source DYNAMIC_TOPIC_CONFIG for a topic, DYNAMIC_BROKER_CONFIG for a broker
(none on serve), DYNAMIC_GROUP_CONFIG for a group; `--all` lists every config.
`--alter --add-config K=V,... --delete-config K,...` sends one IncrementalAlterConfigs (SET and DELETE)
and prints "Completed updating config for topic t.".
`--entity-type users` manages SCRAM credentials instead (see `user_scram.py`). `--command-config FILE`
reaches a secured broker (Kafka client properties, see `client_security.py`).
Exit 0 on success, 1 on a usage error or a refused request (the reason on stdout, as the Kafka tool).
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from .client_security import load_command_config
from .errors_text import error_text
from .wire_client import AdminError, WireAdmin

__all__ = ["add_arguments", "run"]

DESCRIBE_CONFIGS, ALTER_CONFIGS = 32, 44
RESOURCE_TYPES = {"topics": (2, "topic"), "brokers": (4, "broker"), "groups": (32, "group")}
# DescribeConfigs' ConfigSource id -> the Java client's ConfigEntry.ConfigSource name, which the tool prints
SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
           4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
           7: "DYNAMIC_CLIENT_METRICS_CONFIG", 8: "DYNAMIC_GROUP_CONFIG"}
# resource type -> the one source listed without --all (kafka-configs.sh's filter)
DYNAMIC_SOURCE = {2: 1, 4: 2, 32: 8}
SET, DELETE = 0, 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,...]")
    parser.add_argument("--entity-type", required=True, choices=sorted([*RESOURCE_TYPES, "users"]))
    parser.add_argument("--entity-name", metavar="NAME",
                        help="topic, broker id, group id or user (users: optional with --describe)")
    parser.add_argument("--describe", action="store_true", help="show the configs set on the entity")
    parser.add_argument("--all", action="store_true", help="with --describe: every config, with its source")
    parser.add_argument("--alter", action="store_true", help="change configs")
    parser.add_argument("--add-config", metavar="K=V,...", help="with --alter: configs to set")
    parser.add_argument("--delete-config", metavar="K,...", help="with --alter: configs to remove")
    parser.add_argument("--command-config", metavar="FILE",
                        help="client properties for a secured broker (security.protocol, sasl.mechanism, "
                        "sasl.jaas.config, ssl.truststore.location, ...), as Kafka's tools take them")


def _pairs(text: str | None) -> list[tuple[str, str]]:
    out = []
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"bad --add-config entry {item!r} (expected KEY=VALUE)")
        out.append((key.strip(), value.strip()))
    return out


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    if args.describe == args.alter:
        print("Command must include exactly one action: --describe, --alter", file=err)
        return 1
    if args.entity_type != "users" and not args.entity_name:
        print("--entity-name is required for --entity-type " + args.entity_type, file=err)
        return 1
    resource_type, noun = RESOURCE_TYPES.get(args.entity_type, (0, "user"))
    try:
        security = load_command_config(getattr(args, "command_config", None))
        with WireAdmin(args.bootstrap_server, security=security) as admin:
            assert admin.bootstrap is not None
            if args.entity_type == "users":
                from .user_scram import run_users

                return run_users(args, admin, out)
            connection = admin.bootstrap
            if args.entity_type == "groups":
                connection = admin.coordinator(args.entity_name)[0]
            if args.describe:
                _v, response = connection.send(DESCRIBE_CONFIGS, {
                    "resources": [{"resource_type": resource_type, "resource_name": args.entity_name,
                                   "configuration_keys": None}],
                    "include_synonyms": True, "include_documentation": False})
                (result,) = response.results
                if int(result.error_code) != 0:
                    raise AdminError(result.error_message or error_text(int(result.error_code), args.entity_name))
                shown = [c for c in result.configs
                         if args.all or int(c.config_source) == DYNAMIC_SOURCE[resource_type]]
                print(f"{'All' if args.all else 'Dynamic'} configs for {noun} {args.entity_name} are:", file=out)
                for c in sorted(shown, key=lambda c: c.name):
                    synonyms = ", ".join(f"{SOURCES.get(int(s.source), 'UNKNOWN')}:{s.name}={_shown(s.value)}"
                                         for s in c.synonyms)
                    print(f"  {c.name}={_shown(c.value)} sensitive={str(bool(c.is_sensitive)).lower()} "
                          f"synonyms={{{synonyms}}}", file=out)
                return 0
            changes = [{"name": k, "config_operation": SET, "value": v} for k, v in _pairs(args.add_config)]
            changes += [{"name": k.strip(), "config_operation": DELETE, "value": None}
                        for k in (args.delete_config or "").split(",") if k.strip()]
            if not changes:
                print("--alter needs --add-config or --delete-config", file=err)
                return 1
            _v, response = connection.send(ALTER_CONFIGS, {"validate_only": False, "resources": [
                {"resource_type": resource_type, "resource_name": args.entity_name, "configs": changes}]})
            (result,) = response.responses
            if int(result.error_code) != 0:
                raise AdminError(result.error_message or error_text(int(result.error_code), args.entity_name))
            print(f"Completed updating config for {noun} {args.entity_name}.", file=out)
            return 0
    except (AdminError, ValueError) as exc:
        print(f"Error while executing config command with args '{' '.join(_argv(args))}'", file=out)
        print(str(exc), file=out)
        return 1


def _shown(value: str | None) -> str:
    """A value as the Java tool prints it: a null one as `null`."""
    return "null" if value is None else value


def _argv(args: argparse.Namespace) -> list[str]:
    out = ["--bootstrap-server", args.bootstrap_server, "--entity-type", args.entity_type]
    if getattr(args, "command_config", None):
        out += ["--command-config", args.command_config]
    if args.entity_name:
        out += ["--entity-name", args.entity_name]
    if args.describe:
        out.append("--describe")
    if args.alter:
        out.append("--alter")
    if args.add_config:
        out += ["--add-config", args.add_config]
    if args.delete_config:
        out += ["--delete-config", args.delete_config]
    return out
