"""`sharegroup configs`: kafka-configs.sh for topics, brokers and groups, over the wire.

`--describe` asks as kafka-configs.sh asks (DescribeConfigs with IncludeSynonyms) and prints what it
prints: "Dynamic configs for topic t are:" then, sorted by name, one
`  name=value sensitive=bool synonyms={SOURCE:name=value, SOURCE:name=value}` line per config, its synonyms
as the broker returned them in its order (`null` for a null value, `{}` when there are none), SOURCE being
the Java client's ConfigSource name (DYNAMIC_TOPIC_CONFIG, DYNAMIC_GROUP_CONFIG, STATIC_BROKER_CONFIG,
DEFAULT_CONFIG, ...). Without `--all` only the configs set dynamically on the entity are listed, as
kafka-configs.sh filters them: source DYNAMIC_TOPIC_CONFIG for a topic, DYNAMIC_BROKER_CONFIG for a broker
(on serve only the KIP-1191 dead-letter queue keys are dynamic), DYNAMIC_GROUP_CONFIG for a group; `--all`
lists every config. `--entity-type brokers --entity-default` is the cluster-wide default (resource ""):
"Default configs for brokers in the cluster are:", "Completed updating default config for brokers in the
cluster.".
`--alter --add-config K=V,... --delete-config K,...` sends one IncrementalAlterConfigs (SET and DELETE)
and prints "Completed updating config for topic t.".
`--entity-type users` manages SCRAM credentials instead (see `user_scram.py`). `--command-config FILE`
reaches a secured broker (Kafka client properties, see `client_security.py`).
`--add-config` is parsed as kafka-configs.sh parses it (square brackets group a value holding commas:
`k1=v1,k2=[v1,v2]`). Options are checked as kafka-configs.sh checks them, with its texts (a usage error
prints its text on stderr). Exit 0 on success, 1 on a usage error or a refused request (the reason on
stdout).
"""

from __future__ import annotations

import argparse
import re
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


# The entity types this tool handles, in kafka-configs.sh's order (it names them so in its messages).
ENTITY_TYPES = ("topics", "users", "brokers", "groups")


class UsageError(Exception):
    """A bad combination of options: kafka-configs.sh's text on stderr, exit 1."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]", help="REQUIRED: the broker(s) to connect to")
    parser.add_argument("--entity-type", metavar="TYPE", help=f"REQUIRED: one of {', '.join(ENTITY_TYPES)}")
    parser.add_argument("--entity-name", metavar="NAME",
                        help="topic, broker id, group id or user (users: optional with --describe)")
    parser.add_argument("--entity-default", action="store_true",
                        help="with brokers: the cluster-wide default instead of one broker")
    parser.add_argument("--describe", action="store_true", help="show the configs set on the entity")
    parser.add_argument("--all", action="store_true", help="with --describe: every config, with its source")
    parser.add_argument("--alter", action="store_true", help="change configs")
    parser.add_argument("--add-config", metavar="K=V,...", help="with --alter: configs to set")
    parser.add_argument("--delete-config", metavar="K,...", help="with --alter: configs to remove")
    parser.add_argument("--command-config", metavar="FILE",
                        help="client properties for a secured broker (security.protocol, sasl.mechanism, "
                        "sasl.jaas.config, ssl.truststore.location, ...), as Kafka's tools take them")


# A comma or '=' outside square brackets (kafka-configs.sh's `--add-config` syntax).
_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"
_KEY = re.compile(r"[$a-zA-Z0-9._-]*")


def _pairs(text: str | None) -> list[tuple[str, str]]:
    """`k1=v1,k2=[v1,v2]` -> [(k1, v1), (k2, "v1,v2")], as kafka-configs.sh splits `--add-config`."""
    if text is None:
        return []
    items = re.split("," + _OUTSIDE_BRACKETS, text)
    while items and items[-1] == "":  # Java's split drops trailing empty strings
        items.pop()
    out = []
    for item in items:
        parts = re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, item)
        if len(parts) != 2:
            raise UsageError("Invalid entity config: all configs to be added must be in the format \"key=val\" or  "
                             "\"key=[val1,val2]\" to group values which contain commas.")
        key, value = parts[0].strip(), re.sub(r"[\[\]]", "", parts[1]).strip()
        if not _KEY.fullmatch(key):
            raise UsageError(f"Invalid character found for config key: {key}")
        out.append((key, value))
    return out


def check_usage(args: argparse.Namespace) -> None:
    """kafka-configs.sh's option checks (ConfigCommandOptions.checkArgs), in its order and with its
    texts. Without --entity-name, --describe lists every entity in Kafka; this tool needs the name
    (except for users) and says so in the same words Kafka uses for broker loggers."""
    if args.describe == args.alter:
        raise UsageError("Command must include exactly one action: --describe, --alter")
    if args.describe:
        for other, given in (("alter", args.alter), ("add-config", args.add_config is not None),
                             ("delete-config", args.delete_config is not None)):
            if given:
                raise UsageError(f'Option "[describe]" can\'t be used with option "[{other}]"')
    if not args.bootstrap_server:
        raise UsageError("Either --bootstrap-server or --bootstrap-controller must be specified.")
    if args.entity_type is not None and args.entity_type not in ENTITY_TYPES:
        raise UsageError(f"Invalid entity type {args.entity_type}, the entity type must be one of "
                         f"{', '.join(ENTITY_TYPES)} with a --bootstrap-server or --bootstrap-controller argument")
    if args.entity_type is None:
        raise UsageError("At least one entity type must be specified")
    if args.entity_name and args.entity_type == "brokers":
        try:
            int(args.entity_name)
        except ValueError:
            raise UsageError("The entity name for brokers must be a valid integer broker id, but it is: "
                             f"{args.entity_name}") from None
    default = bool(args.entity_default)
    if default and args.entity_name:
        raise UsageError("Only one of --entity-name or --entity-default can be specified")
    if default and args.entity_type != "brokers":
        raise UsageError(f"--entity-default is not supported for {args.entity_type} on this tool (brokers only)")
    if default:
        args.entity_name = ""  # Kafka's name of the cluster-wide default resource
    if args.describe and not args.entity_name and not default and args.entity_type != "users":
        raise UsageError(f"An entity name must be specified with --describe of {args.entity_type}")
    if args.alter:
        if not args.entity_name and not default:
            if args.entity_type in ("users", "brokers"):
                raise UsageError("An entity-name or default entity must be specified with --alter of users, "
                                 "clients, brokers or ips")
            raise UsageError(f"An entity name must be specified with --alter of {args.entity_type}")
        if args.add_config is None and args.delete_config is None:
            raise UsageError("At least one of --add-config, --add-config-file, or --delete-config must be "
                             "specified with --alter")


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    try:
        check_usage(args)
        if args.entity_type != "users":
            _pairs(args.add_config)  # a malformed --add-config is a usage error, before connecting
    except UsageError as exc:
        print(exc, file=err)
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
                if args.entity_name == "" and resource_type == 4:
                    print("Default configs for brokers in the cluster are:", file=out)
                    shown = [c for c in result.configs if args.all or int(c.config_source) == 3]
                else:
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
            _v, response = connection.send(ALTER_CONFIGS, {"validate_only": False, "resources": [
                {"resource_type": resource_type, "resource_name": args.entity_name, "configs": changes}]})
            (result,) = response.responses
            if int(result.error_code) != 0:
                raise AdminError(result.error_message or error_text(int(result.error_code), args.entity_name))
            if args.entity_name == "" and resource_type == 4:
                print("Completed updating default config for brokers in the cluster.", file=out)
            else:
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
    elif args.entity_default:
        out.append("--entity-default")
    if args.describe:
        out.append("--describe")
    if args.alter:
        out.append("--alter")
    if args.add_config:
        out += ["--add-config", args.add_config]
    if args.delete_config:
        out += ["--delete-config", args.delete_config]
    return out
