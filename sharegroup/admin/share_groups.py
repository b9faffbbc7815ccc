"""`sharegroup share-groups`: kafka-share-groups.sh over the wire, against any broker (ours or Kafka 4.x).

Actions (exactly one): `--list [--state [STATES]]`, `--describe (--group G ... | --all-groups) [--members |
--offsets | --state] [--verbose]`, `--reset-offsets --group G (--topic T[:P,...] ... | --all-topics)
(--to-earliest | --to-latest | --to-datetime ISO | --to-offset N) (--dry-run | --execute)`,
`--delete-offsets --group G --topic T ...`, `--delete (--group G ... | --all-groups)`. Tables have
kafka-share-groups.sh's columns, widths and blank lines; a missing value prints "-". `--command-config
FILE` reaches a secured broker (Kafka client properties, see `client_security.py`). A group with a
dead-letter queue topic (KIP-1191, read with DescribeConfigs) gets one more line after its describe table,
"Share group 'G' dead-letter queue topic: T" (Kafka's tool has none).

Options are checked as kafka-share-groups.sh checks them (ShareGroupCommandOptions.checkArgs: its order,
its texts, such as `Option [describe] takes at most one of these options: [members], [offsets],
[state]`). Exit codes as the Kafka tool: 0 when the action ran (including a deletion that was refused
per group, which is reported in the output), 1 for a usage error (its text on stderr), a failed request
or an unknown group on describe (the reason on stdout as "Error: ...").
"""

from __future__ import annotations

import argparse
import datetime
import sys
from typing import Any, TextIO

from .client_security import load_command_config
from .errors_text import error_text
from .wire_client import AdminError, WireAdmin

_DESCRIBE_CONFIGS, _GROUP_RESOURCE = 32, 32
_DLQ_TOPIC = "errors.deadletterqueue.topic.name"

__all__ = ["add_arguments", "run"]

LIST_GROUPS, DELETE_GROUPS, LIST_OFFSETS, DESCRIBE, DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = (
    16, 42, 2, 77, 90, 91, 92)
GROUP_ID_NOT_FOUND = 69
MISSING = "-"
SHARE_STATES = ("Unknown", "Empty", "Stable", "Dead")
EXIT_OK, EXIT_FAILED = 0, 1


class UsageError(Exception):
    """A bad combination of options (exit 1, message on stderr)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]",
                        help="REQUIRED: the broker(s) to connect to")
    actions = parser.add_argument_group("actions (exactly one)")
    actions.add_argument("--list", action="store_true", help="list all share groups")
    actions.add_argument("--describe", action="store_true", help="describe a share group")
    actions.add_argument("--delete", action="store_true", help="delete an empty share group")
    actions.add_argument("--reset-offsets", action="store_true", help="reset the start offsets of an empty group")
    actions.add_argument("--delete-offsets", action="store_true", help="delete a topic's offsets of an empty group")
    parser.add_argument("--group", action="append", default=[], metavar="G", help="the share group")
    parser.add_argument("--all-groups", action="store_true", help="with --describe or --delete: every share group")
    parser.add_argument("--topic", action="append", default=[], metavar="T[:P,...]",
                        help="a topic (optionally with partitions) for --reset-offsets / --delete-offsets")
    parser.add_argument("--all-topics", action="store_true",
                        help="with --reset-offsets: every topic the group holds offsets for")
    parser.add_argument("--members", action="store_true", help="with --describe: the members")
    parser.add_argument("--offsets", action="store_true", help="with --describe: start offsets and lag (default)")
    parser.add_argument("--state", nargs="?", const="", default=None, metavar="STATES",
                        help="with --describe: the group's state; with --list: states and a state filter")
    parser.add_argument("--verbose", action="store_true", help="with --describe: more columns")
    parser.add_argument("--to-earliest", action="store_true", help="reset to the log start offsets")
    parser.add_argument("--to-latest", action="store_true", help="reset to the log end offsets")
    parser.add_argument("--to-datetime", metavar="ISO", help="reset to the first offset at or after this time")
    parser.add_argument("--to-offset", type=int, metavar="N", help="reset to this offset (kept within the log)")
    parser.add_argument("--dry-run", action="store_true", help="with --reset-offsets: only show the new offsets")
    parser.add_argument("--execute", action="store_true", help="with --reset-offsets: apply the reset")
    parser.add_argument("--timeout", type=int, default=5000, metavar="MS", help="request timeout (default 5000)")
    parser.add_argument("--command-config", metavar="FILE",
                        help="client properties for a secured broker (security.protocol, sasl.mechanism, "
                        "sasl.jaas.config, ssl.truststore.location, ...), as Kafka's tools take them")


# The reset scenarios, in the order their clashes are reported.
_SCENARIOS = ("to_offset", "to_datetime", "to_earliest", "to_latest")


def _opt(name: str) -> str:
    """An option as Kafka's tools name it in their messages (jopt-simple's `[name]`)."""
    return f"[{name.replace('_', '-')}]"


def _clash(used: str, other: str) -> UsageError:
    return UsageError(f'Option "{_opt(used)}" can\'t be used with option "{_opt(other)}"')


def check_usage(args: argparse.Namespace) -> None:
    """kafka-share-groups.sh's option checks, in its order and with its texts (UsageError: exit 1, the
    text on stderr). Kafka also lists `[from-file]` and `[to-current]`, which this tool does not have."""
    if not args.bootstrap_server:
        raise UsageError(f'Missing required argument "{_opt("bootstrap-server")}"')
    group, all_groups, topic, all_topics = bool(args.group), args.all_groups, bool(args.topic), args.all_topics
    if args.describe:
        if not group and not all_groups:
            raise UsageError("Option [describe] takes one of these options: [all-groups], [group]")
        if sum((args.members, args.offsets, args.state is not None)) > 1:
            raise UsageError("Option [describe] takes at most one of these options: [members], [offsets], [state]")
        if args.state:
            raise UsageError("Option [describe] does not take a value for [state]")
    if args.delete:
        if not group and not all_groups:
            raise UsageError("Option [delete] takes the options [group] or [all-groups].")
        if group and all_groups:
            raise UsageError("Option [delete] takes either [group] or [all-groups], not both.")
        if topic or all_topics:
            raise UsageError("Option [delete] does not take the options [topic] or [all-topics].")
    if args.delete_offsets and (not group or not topic):
        raise UsageError("Option [delete-offsets] takes the following options: [group], [topic]")
    if args.reset_offsets:
        if args.dry_run and args.execute:
            raise UsageError("Option [reset-offsets] only accepts one of [execute] and [dry-run]")
        if not args.dry_run and not args.execute:
            raise UsageError("Option [reset-offsets] takes the option: [execute] or [dry-run]")
        if not group:
            raise UsageError("Option [reset-offsets] takes the option: [group]")
        if not topic and not all_topics:
            raise UsageError("Option [reset-offsets] takes one of these options: [all-topics], [topic]")
        if topic and all_topics:
            raise _clash("topic", "all-topics")
        scenarios = [s for s in _SCENARIOS if getattr(args, s) not in (None, False)]
        if not scenarios:
            raise UsageError("Option [reset-offsets] takes one of these options: [to-datetime], [to-earliest], "
                             "[to-latest], [to-offset]")
        if len(scenarios) > 1:
            raise _clash(scenarios[0], scenarios[1])
    if group and all_groups:
        raise _clash("group", "all-groups")
    if group and args.list:
        raise _clash("group", "list")
    for action in ("list", "describe", "delete"):
        if topic and getattr(args, action):
            raise _clash("topic", action)


def _unavailable(args: argparse.Namespace) -> list[str]:
    """Options given without the action they belong to (jopt-simple refuses them while parsing)."""
    out = [name for name in ("members", "offsets", "verbose") if getattr(args, name) and not args.describe]
    if args.state is not None and not (args.describe or args.list):
        out.append("state")
    return out


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    chosen = [a for a in ("list", "describe", "delete", "reset_offsets", "delete_offsets") if getattr(args, a)]
    try:
        unavailable = _unavailable(args)
        if unavailable:
            raise AdminError(f"Option(s) {', '.join(_opt(u) for u in unavailable)} are unavailable given other "
                             "options on the command line")
        check_usage(args)
        if len(chosen) != 1:
            raise UsageError("Command must include exactly one action: --list, --describe, --delete, "
                             "--reset-offsets, --delete-offsets.")
        action = chosen[0]
        if action in ("reset_offsets", "delete_offsets") and len(args.group) > 1:
            raise AdminError("Found multiple arguments for option group, but you asked for only one")
        security = load_command_config(getattr(args, "command_config", None))
        with WireAdmin(args.bootstrap_server, timeout_s=max(1.0, args.timeout / 1000), security=security) as admin:
            tool = ShareGroupTool(admin, out, err)
            if action == "list":
                tool.list(args.state)
            elif action == "describe":
                groups = [g for g, _s in tool._listed([])] if args.all_groups else args.group
                tool.describe(groups, "members" if args.members else "state" if args.state is not None
                              else "offsets", args.verbose)
            elif action == "delete":
                tool.delete(None if args.all_groups else args.group)
            elif action == "delete_offsets":
                tool.delete_offsets(args.group[0], args.topic)
            else:
                tool.reset_offsets(args.group[0], args.topic, args, execute=args.execute)
    except UsageError as exc:
        print(exc, file=err)
        return EXIT_FAILED
    except (AdminError, ValueError) as exc:
        print(f"\nError: Executing share group command failed due to {exc}", file=out)
        return EXIT_FAILED
    return EXIT_OK


class ShareGroupTool:
    """The actions, each printing what kafka-share-groups.sh prints."""

    def __init__(self, admin: WireAdmin, out: TextIO, err: TextIO) -> None:
        self.admin = admin
        self.out = out
        self.err = err

    # -- list ------------------------------------------------------------------------------------

    def _listed(self, states: list[str]) -> list[tuple[str, str]]:
        assert self.admin.bootstrap is not None
        _v, response = self.admin.bootstrap.send(LIST_GROUPS, {"states_filter": states, "types_filter": ["share"]})
        if int(response.error_code) != 0:
            raise AdminError(error_text(int(response.error_code)))
        groups = [(g.group_id, g.group_state) for g in response.groups
                  if getattr(g, "group_type", "share").lower() == "share"]
        return sorted(groups)

    def list(self, state: str | None) -> None:
        if state is None:
            for group_id, _state in self._listed([]):
                print(group_id, file=self.out)
            return
        states = []
        for name in (s.strip() for s in state.split(",") if s.strip()):
            match = next((s for s in SHARE_STATES if s.lower() == name.lower()), None)
            if match is None:
                raise ValueError(f"Invalid state list '{state}'. Valid states are: {', '.join(SHARE_STATES)}")
            states.append(match)
        listed = self._listed(states)
        width = max([15] + [len(g) for g, _s in listed])
        print(f"{'GROUP':<{width}} STATE", file=self.out)
        for group_id, group_state in listed:
            print(f"{group_id:<{width}} {group_state}", file=self.out)

    # -- describe --------------------------------------------------------------------------------

    def _describe(self, group_id: str) -> tuple[Any, str, int]:
        connection, address, node_id = self.admin.coordinator(group_id)
        _v, response = connection.send(DESCRIBE, {"group_ids": [group_id], "include_authorized_operations": False})
        (group,) = response.groups
        if int(group.error_code) != 0:
            raise _GroupError(int(group.error_code), group.error_message or error_text(int(group.error_code), group_id))
        return group, address, node_id

    def _offsets(self, group_id: str) -> list[tuple[str, int, int, int, int]]:
        """(topic, partition, start offset, leader epoch, lag) of every share-partition of the group."""
        connection, _address, _node = self.admin.coordinator(group_id)
        _v, response = connection.send(DESCRIBE_OFFSETS, {"groups": [{"group_id": group_id, "topics": None}]})
        (group,) = response.groups
        if int(group.error_code) != 0:
            raise AdminError(group.error_message or error_text(int(group.error_code), group_id))
        rows = []
        for topic in group.topics:
            for p in topic.partitions:
                if int(p.error_code) != 0:
                    raise AdminError(p.error_message or error_text(int(p.error_code)))
                rows.append((topic.topic_name, int(p.partition_index), int(p.start_offset), int(p.leader_epoch),
                             int(p.lag)))
        return sorted(rows)

    def describe(self, group_ids: list[str], what: str, verbose: bool) -> None:
        """Describe each group, sorted by id as Kafka's tool prints them; every group is described
        before anything is printed, so an unknown one fails the command without partial output."""
        described = {}
        for group_id in sorted(set(group_ids)):
            try:
                described[group_id] = self._describe(group_id)
            except _GroupError as exc:
                raise AdminError(str(exc)) from None
        for group_id, (group, address, node_id) in described.items():
            self._print_description(group_id, group, address, node_id, what, verbose)
            topic = self._dead_letter_topic(group_id) if group.group_state != "Dead" else ""
            if topic:  # KIP-1191: Kafka's tool does not show it; ours adds this line when there is one
                print(f"\nShare group '{group_id}' dead-letter queue topic: {topic}", file=self.out)

    def _dead_letter_topic(self, group_id: str) -> str:
        """The group's `errors.deadletterqueue.topic.name` (DescribeConfigs on the group); "" when it has none
        or the configs cannot be described (an older broker, no DESCRIBE_CONFIGS permission)."""
        try:
            connection, _address, _node = self.admin.coordinator(group_id)
            _v, response = connection.send(_DESCRIBE_CONFIGS, {
                "resources": [{"resource_type": _GROUP_RESOURCE, "resource_name": group_id,
                               "configuration_keys": [_DLQ_TOPIC]}],
                "include_synonyms": False, "include_documentation": False})
        except AdminError:
            return ""
        (result,) = response.results
        if int(result.error_code) != 0:
            return ""
        return next((c.value or "" for c in result.configs if c.name == _DLQ_TOPIC), "")

    def _print_description(self, group_id: str, group: Any, address: str, node_id: int, what: str,
                           verbose: bool) -> None:
        if what == "offsets":
            rows = self._offsets(group_id)
            if not rows:
                print(f"\nShare group '{group_id}' has no offset information.", file=self.out)
                return
            g = max(15, len(group_id))
            t = max([15] + [len(r[0]) for r in rows])

            def line(*cells: object) -> str:
                if verbose:
                    return f"\n{cells[0]!s:<{g}} {cells[1]!s:<{t}} {cells[2]!s:<10} {cells[3]!s:<13} {cells[4]!s:<13} {cells[5]}"
                return f"\n{cells[0]!s:<{g}} {cells[1]!s:<{t}} {cells[2]!s:<10} {cells[4]!s:<13} {cells[5]}"

            text = line("GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG")
            for topic, partition, start, epoch, lag in rows:
                text += line(group_id, topic, partition, _value(epoch if start >= 0 else -1), _value(start), _value(lag))
            print(text, file=self.out)
            return
        state = group.group_state
        if state == "Dead":
            print(f"\nError: Share group '{group_id}' does not exist.", file=self.out)
        elif state == "Empty":
            print(f"\nShare group '{group_id}' has no active members.", file=self.err)
        g = max(15, len(group_id))
        if what == "state":
            coordinator = f"{address}  ({node_id})"
            c = max(25, len(coordinator))
            if verbose:
                head = f"\n{'GROUP':<{g}} {'COORDINATOR (ID)':<{c}} {'STATE':<15} {'GROUP-EPOCH':<12} {'ASSIGNMENT-EPOCH':<17} #MEMBERS"
                row = (f"\n{group_id:<{g}} {coordinator:<{c}} {state:<15} {group.group_epoch!s:<12} "
                       f"{group.assignment_epoch!s:<17} {len(group.members)}")
            else:
                head = f"\n{'GROUP':<{g}} {'COORDINATOR (ID)':<{c}} {'STATE':<15} #MEMBERS"
                row = f"\n{group_id:<{g}} {coordinator:<{c}} {state:<15} {len(group.members)}"
            print(head + row, file=self.out)
            return
        if state == "Dead" or not group.members:
            return
        members = sorted(group.members, key=lambda m: m.member_id)
        mi = max([15] + [len(m.member_id) for m in members])
        h = max([15] + [len(m.client_host) for m in members])
        ci = max([15] + [len(m.client_id) for m in members])
        text = ""
        if verbose:
            text += f"\n{'GROUP':<{g}} {'CONSUMER-ID':<{mi}} {'HOST':<{h}} {'CLIENT-ID':<{ci}} {'#PARTITIONS':<12} {'MEMBER-EPOCH':<13} ASSIGNMENT"
        else:
            text += f"\n{'GROUP':<{g}} {'CONSUMER-ID':<{mi}} {'HOST':<{h}} {'CLIENT-ID':<{ci}} {'#PARTITIONS':<12} ASSIGNMENT"
        for m in members:
            parts = m.assignment.topic_partitions if m.assignment is not None else ()
            count = sum(len(tp.partitions) for tp in parts)
            assignment = ";".join(sorted(f"{tp.topic_name}:" + ",".join(str(p) for p in sorted(tp.partitions))
                                         for tp in parts))
            if verbose:
                text += f"\n{group_id:<{g}} {m.member_id:<{mi}} {m.client_host:<{h}} {m.client_id:<{ci}} {count:<12} {m.member_epoch!s:<13} {assignment}"
            else:
                text += f"\n{group_id:<{g}} {m.member_id:<{mi}} {m.client_host:<{h}} {m.client_id:<{ci}} {count:<12} {assignment}"
        print(text, file=self.out)

    # -- delete ----------------------------------------------------------------------------------

    def delete(self, group_ids: list[str] | None) -> None:
        """Delete the groups (None: every share group, --all-groups), each checked first as Kafka's tool
        does: a share group that exists and is Empty. Prints which were deleted and why others were not."""
        listed = dict(self._listed([]))
        wanted = sorted(listed) if group_ids is None else list(dict.fromkeys(group_ids))
        failed: dict[str, str] = {}
        deleted: list[str] = []
        for group_id in wanted:
            if group_id not in listed:
                failed[group_id] = (f"org.apache.kafka.common.errors.GroupIdNotFoundException: Group '{group_id}' "
                                    "is not a share group.")
            elif listed[group_id] == "Dead":
                failed[group_id] = f"java.lang.IllegalStateException: Share group '{group_id}' group state is DEAD."
            elif listed[group_id] != "Empty":
                failed[group_id] = (f"org.apache.kafka.common.errors.GroupNotEmptyException: Share group "
                                    f"'{group_id}' is not EMPTY.")
            else:
                connection, _a, _n = self.admin.coordinator(group_id)
                _v, response = connection.send(DELETE_GROUPS, {"groups_names": [group_id]})
                (result,) = response.results
                if int(result.error_code) != 0:
                    failed[group_id] = error_text(int(result.error_code), group_id)
                else:
                    deleted.append(group_id)
        names = ", ".join(f"'{g}'" for g in deleted)
        if not failed:
            print(f"Deletion of requested share groups ({names}) was successful.", file=self.out)
            return
        print("\nError: Deletion of some share groups failed:", file=self.out)
        for group, reason in failed.items():
            print(f"* Group '{group}' could not be deleted due to: {reason}", file=self.out)
        if deleted:
            print(f"\nThese share groups were deleted successfully: {names}", file=self.out)

    def delete_offsets(self, group_id: str, topics: list[str]) -> None:
        names = sorted(set(topics))
        connection, _a, _n = self.admin.coordinator(group_id)
        _v, response = connection.send(DELETE_OFFSETS, {"group_id": group_id,
                                                        "topics": [{"topic_name": t} for t in names]})
        top = int(response.error_code)
        results: dict[str, str] = {}
        if top != 0:
            message = response.error_message or error_text(top, group_id)
            print(f"\nError: {message}", file=self.out)
            results = {t: f"Error: {message}" for t in names}
        else:
            by_name = {r.topic_name: r for r in response.responses}
            for t in names:
                r = by_name.get(t)
                code = 0 if r is None else int(r.error_code)
                results[t] = "Successful" if code == 0 else f"Error: {(r.error_message if r else None) or error_text(code)}"
        w = max([15] + [len(t) for t in results])
        text = f"\n{'TOPIC':<{w}} STATUS"
        for t in sorted(results):
            text += f"\n{t:<{w}} {results[t]}"
        print(text, file=self.out)

    # -- reset offsets ---------------------------------------------------------------------------

    def reset_offsets(self, group_id: str, topics: list[str], args: argparse.Namespace, execute: bool) -> None:
        try:
            group, _a, _n = self._describe(group_id)
            if group.group_state not in ("Empty", "Dead"):
                raise ValueError(f"Share group '{group_id}' is not empty.")
        except _GroupError as exc:
            if exc.code != GROUP_ID_NOT_FOUND:
                raise AdminError(str(exc)) from None
        if topics:
            wanted = self._parse_topics(topics)
        else:  # --all-topics: every topic the group holds offsets for
            wanted = sorted({(t, p) for t, p, _s, _e, _l in self._offsets(group_id)})
        new = self._new_offsets(wanted, args)
        if execute:
            by_topic: dict[str, list[dict[str, int]]] = {}
            for (topic, partition), offset in sorted(new.items()):
                by_topic.setdefault(topic, []).append({"partition_index": partition, "start_offset": offset})
            connection, _a, _n = self.admin.coordinator(group_id)
            _v, response = connection.send(ALTER_OFFSETS, {"group_id": group_id, "topics": [
                {"topic_name": t, "partitions": ps} for t, ps in by_topic.items()]})
            if int(response.error_code) != 0:
                raise AdminError(response.error_message or error_text(int(response.error_code), group_id))
            for topic in response.responses:
                for p in topic.partitions:
                    if int(p.error_code) != 0:
                        raise AdminError(p.error_message or error_text(int(p.error_code)))
        if new:
            text = f"\n{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} {'NEW-OFFSET':<15}"
            for (topic, partition), offset in sorted(new.items()):
                text += f"\n{group_id:<30} {topic:<30} {partition!s:<10} {offset!s:<15}"
            print(text, file=self.out)
        else:
            print("", file=self.out)

    def _parse_topics(self, topics: list[str]) -> list[tuple[str, int]]:
        metadata = self.admin.metadata(sorted({t.split(":", 1)[0] for t in topics}))
        known = {t.name: sorted(int(p.partition_index) for p in t.partitions)
                 for t in metadata.topics if int(t.error_code) == 0}
        out: list[tuple[str, int]] = []
        for spec in topics:
            name, sep, parts = spec.partition(":")
            if name not in known:
                raise ValueError(f"The partitions of topic {name} do not exist (the topic is unknown).")
            partitions = [int(p) for p in parts.split(",") if p.strip()] if sep else known[name]
            missing = [p for p in partitions if p not in known[name]]
            if missing:
                raise ValueError(f"The partitions {', '.join(f'{name}-{p}' for p in missing)} do not exist.")
            out += [(name, p) for p in partitions]
        return sorted(set(out))

    def _list_offsets(self, partitions: list[tuple[str, int]], timestamp: int) -> dict[tuple[str, int], int]:
        metadata = self.admin.metadata(sorted({t for t, _p in partitions}))
        leaders = {(t.name, int(p.partition_index)): int(p.leader_id) for t in metadata.topics for p in t.partitions}
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for tp in partitions:
            if tp not in leaders:
                raise ValueError(f"The partition {tp[0]}-{tp[1]} does not exist.")
            by_leader.setdefault(leaders[tp], []).append(tp)
        found: dict[tuple[str, int], int] = {}
        for leader, tps in by_leader.items():
            by_topic: dict[str, list[int]] = {}
            for t, p in tps:
                by_topic.setdefault(t, []).append(p)
            _v, response = self.admin.node(leader, metadata).send(LIST_OFFSETS, {
                "replica_id": -1, "isolation_level": 0, "topics": [
                    {"name": t, "partitions": [{"partition_index": p, "timestamp": timestamp, "max_num_offsets": 1}
                                               for p in ps]} for t, ps in by_topic.items()]})
            for topic in response.topics:
                for p in topic.partitions:
                    if int(p.error_code) != 0:
                        raise AdminError(f"ListOffsets of {topic.name}-{p.partition_index}: {error_text(int(p.error_code))}")
                    found[(topic.name, int(p.partition_index))] = int(p.offset)
        return found

    def _new_offsets(self, partitions: list[tuple[str, int]], args: argparse.Namespace) -> dict[tuple[str, int], int]:
        if not partitions:
            return {}
        if args.to_earliest:
            return self._list_offsets(partitions, -2)
        if args.to_latest:
            return self._list_offsets(partitions, -1)
        if args.to_datetime is not None:
            ms = _parse_datetime_ms(args.to_datetime)
            by_time = self._list_offsets(partitions, ms)
            latest = self._list_offsets(partitions, -1)
            return {tp: (o if o >= 0 else latest[tp]) for tp, o in by_time.items()}
        earliest, latest = self._list_offsets(partitions, -2), self._list_offsets(partitions, -1)
        out = {}
        for tp in partitions:
            offset = args.to_offset
            if offset < earliest[tp]:
                print(f"New offset ({offset}) is lower than earliest offset for topic partition {tp[0]}-{tp[1]}. "
                      f"Value will be set to {earliest[tp]}", file=self.out)
                offset = earliest[tp]
            elif offset > latest[tp]:
                print(f"New offset ({offset}) is higher than latest offset for topic partition {tp[0]}-{tp[1]}. "
                      f"Value will be set to {latest[tp]}", file=self.out)
                offset = latest[tp]
            out[tp] = offset
        return out


class _GroupError(AdminError):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _value(number: int) -> str:
    return MISSING if number < 0 else str(number)


def _parse_datetime_ms(text: str) -> int:
    """Kafka's --to-datetime format ('YYYY-MM-DDTHH:mm:SS.sss', optionally with a zone such as Z or
    +01:00); without a zone, local time."""
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"Error parsing timestamp {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss[zone]") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return int(moment.timestamp() * 1000)
