"""`sharegroup share-groups` and `sharegroup configs` against a live serve: exact output and exit codes."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout

import pytest

from sharegroup.cli import main
from tests.server_harness import BrokerThread, RawClient, batch_bytes, run_cli
from tests.test_server_share_wire import heartbeat

MEMBER = "AAAAAAAAAAAAAAAAAAAAAA"


@pytest.fixture
def broker(tmp_path):
    b = BrokerThread(tmp_path, share=True, overrides={"group.share.min.record.lock.duration.ms": 1000})
    info = b.call(b.store.create_topic("orders", 2))
    b.call(b.store.append(info.topic_id, 0, batch_bytes(4), acks=-1))
    b.call(b.store.append(info.topic_id, 1, batch_bytes(2), acks=-1))
    yield b
    b.stop()


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def sg(broker: BrokerThread, *args: str) -> tuple[int, str, str]:
    return cli("share-groups", "--bootstrap-server", broker.bootstrap, *args)


def test_reset_offsets_dry_run_then_execute_then_describe(broker):
    code, out, _ = sg(broker, "--reset-offsets", "--group", "g", "--topic", "orders", "--to-earliest", "--dry-run")
    assert code == 0
    assert out == ("\nGROUP                          TOPIC                          PARTITION  NEW-OFFSET     "
                   "\ng                              orders                         0          0              "
                   "\ng                              orders                         1          0              \n")
    assert broker.share.coordinator.group_ids == []  # a dry run changes nothing
    code, out, _ = sg(broker, "--reset-offsets", "--group", "g", "--topic", "orders:0", "--to-offset", "3", "--execute")
    assert code == 0 and out.splitlines()[-1].split() == ["g", "orders", "0", "3"]
    code, out, _ = sg(broker, "--describe", "--group", "g")
    assert code == 0
    assert out == ("\nGROUP           TOPIC           PARTITION  START-OFFSET  LAG"
                   "\ng               orders          0          3             1\n")
    code, out, _ = sg(broker, "--describe", "--group", "g", "--offsets", "--verbose")
    assert out.splitlines()[1].split() == ["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG"]
    assert out.splitlines()[2].split() == ["g", "orders", "0", "0", "3", "1"]


def test_reset_offsets_clamps_to_the_log_and_by_datetime(broker):
    code, out, _ = sg(broker, "--reset-offsets", "--group", "g", "--topic", "orders:1", "--to-offset", "9", "--execute")
    assert code == 0
    assert out.splitlines()[0] == ("New offset (9) is higher than latest offset for topic partition orders-1. "
                                   "Value will be set to 2")
    code, out, _ = sg(broker, "--reset-offsets", "--group", "g", "--topic", "orders", "--to-datetime",
                      "2020-01-01T00:00:00.000Z", "--dry-run")
    assert [line.split()[-1] for line in out.splitlines()[2:]] == ["0", "0"]  # every record is newer
    code, out, _ = sg(broker, "--reset-offsets", "--group", "g", "--topic", "orders", "--to-datetime",
                      "2030-01-01T00:00:00Z", "--dry-run")
    assert [line.split()[-1] for line in out.splitlines()[2:]] == ["4", "2"]  # none that recent: the log end
    code, out, _ = sg(broker, "--reset-offsets", "--group", "g", "--topic", "nope", "--to-latest", "--execute")
    assert code == 1 and "The partitions of topic nope do not exist" in out


def test_list_state_members_and_refusals_while_a_member_is_joined(broker):
    sg(broker, "--reset-offsets", "--group", "idle", "--topic", "orders", "--to-latest", "--execute")
    client = RawClient(broker.broker.port)
    try:
        assert heartbeat(client, MEMBER, 0, ["orders"], group="busy").error_code == 0
        code, out, _ = sg(broker, "--list")
        assert (code, out) == (0, "busy\nidle\n")
        code, out, _ = sg(broker, "--list", "--state")
        assert out == "GROUP           STATE\nbusy            Stable\nidle            Empty\n"
        code, out, _ = sg(broker, "--list", "--state", "empty")
        assert out == "GROUP           STATE\nidle            Empty\n"
        code, out, _ = sg(broker, "--describe", "--group", "busy", "--state")
        coordinator = f"{broker.bootstrap}  (1)"
        width = max(25, len(coordinator))
        assert out == (f"\nGROUP           {'COORDINATOR (ID)':<{width}} STATE           #MEMBERS"
                       f"\nbusy            {coordinator:<{width}} Stable          1\n")
        code, out, _ = sg(broker, "--describe", "--group", "busy", "--members")
        lines = out.splitlines()
        assert lines[1].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
        assert lines[2].split()[:2] == ["busy", MEMBER] and lines[2].split()[-2] in ("0", "1", "2")
        code, _out, err = sg(broker, "--describe", "--group", "idle", "--members")
        assert (code, err) == (0, "\nShare group 'idle' has no active members.\n")
        code, out, _ = sg(broker, "--reset-offsets", "--group", "busy", "--topic", "orders", "--to-earliest", "--execute")
        assert (code, out) == (1, "\nError: Executing share group command failed due to Share group 'busy' is not empty.\n")
        code, out, _ = sg(broker, "--delete", "--group", "busy")
        assert code == 0
        assert out == ("\nError: Deletion of some share groups failed:\n* Group 'busy' could not be deleted due to: "
                       "org.apache.kafka.common.errors.GroupNotEmptyException: Share group 'busy' is not EMPTY.\n")
    finally:
        client.close()


def test_delete_offsets_and_delete_group(broker):
    sg(broker, "--reset-offsets", "--group", "g", "--topic", "orders", "--to-earliest", "--execute")
    code, out, _ = sg(broker, "--delete-offsets", "--group", "g", "--topic", "orders", "--topic", "nope")
    assert code == 0
    assert out == ("\nTOPIC           STATUS\nnope            Error: This server does not host this topic-partition."
                   "\norders          Successful\n")
    code, out, _ = sg(broker, "--describe", "--group", "g")
    assert out == "\nShare group 'g' has no offset information.\n"
    code, out, _ = sg(broker, "--delete", "--group", "g")
    assert (code, out) == (0, "Deletion of requested share groups ('g') was successful.\n")
    code, out, _ = sg(broker, "--describe", "--group", "g")
    assert code == 1 and out.startswith("\nError: Executing share group command failed due to ")
    code, out, _ = sg(broker, "--delete", "--group", "g")
    assert "GroupIdNotFoundException: Group 'g' is not a share group." in out


NOWHERE = ("--bootstrap-server", "127.0.0.1:1")  # a usage error is found before any connection


@pytest.mark.parametrize("args, text", [
    (("--list",), 'Missing required argument "[bootstrap-server]"'),
    ((*NOWHERE, "--list", "--describe", "--all-groups"),
     "Command must include exactly one action: --list, --describe, --delete, --reset-offsets, --delete-offsets."),
    ((*NOWHERE, "--describe"), "Option [describe] takes one of these options: [all-groups], [group]"),
    ((*NOWHERE, "--describe", "--group", "g", "--members", "--offsets"),
     "Option [describe] takes at most one of these options: [members], [offsets], [state]"),
    ((*NOWHERE, "--describe", "--group", "g", "--members", "--state"),
     "Option [describe] takes at most one of these options: [members], [offsets], [state]"),
    ((*NOWHERE, "--describe", "--group", "g", "--state", "Stable"), "Option [describe] does not take a value for [state]"),
    ((*NOWHERE, "--describe", "--group", "g", "--all-groups"), 'Option "[group]" can\'t be used with option "[all-groups]"'),
    ((*NOWHERE, "--describe", "--group", "g", "--topic", "t"), 'Option "[topic]" can\'t be used with option "[describe]"'),
    ((*NOWHERE, "--delete"), "Option [delete] takes the options [group] or [all-groups]."),
    ((*NOWHERE, "--delete", "--group", "g", "--all-groups"), "Option [delete] takes either [group] or [all-groups], not both."),
    ((*NOWHERE, "--delete", "--group", "g", "--topic", "t"), "Option [delete] does not take the options [topic] or [all-topics]."),
    ((*NOWHERE, "--delete-offsets", "--group", "g"), "Option [delete-offsets] takes the following options: [group], [topic]"),
    ((*NOWHERE, "--reset-offsets", "--group", "g", "--topic", "t", "--to-latest"),
     "Option [reset-offsets] takes the option: [execute] or [dry-run]"),
    ((*NOWHERE, "--reset-offsets", "--group", "g", "--topic", "t", "--to-latest", "--dry-run", "--execute"),
     "Option [reset-offsets] only accepts one of [execute] and [dry-run]"),
    ((*NOWHERE, "--reset-offsets", "--topic", "t", "--to-latest", "--dry-run"), "Option [reset-offsets] takes the option: [group]"),
    ((*NOWHERE, "--reset-offsets", "--group", "g", "--to-latest", "--dry-run"),
     "Option [reset-offsets] takes one of these options: [all-topics], [topic]"),
    ((*NOWHERE, "--reset-offsets", "--group", "g", "--topic", "t", "--all-topics", "--to-latest", "--dry-run"),
     'Option "[topic]" can\'t be used with option "[all-topics]"'),
    ((*NOWHERE, "--reset-offsets", "--group", "g", "--all-topics", "--dry-run"),
     "Option [reset-offsets] takes one of these options: [to-datetime], [to-earliest], [to-latest], [to-offset]"),
    ((*NOWHERE, "--reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--to-offset", "3", "--execute"),
     'Option "[to-offset]" can\'t be used with option "[to-earliest]"'),
    ((*NOWHERE, "--list", "--group", "g"), 'Option "[group]" can\'t be used with option "[list]"'),
])
def test_share_groups_usage_errors_have_kafkas_texts_and_exit_1(args, text):
    """kafka-share-groups.sh's option checks (ShareGroupCommandOptions.checkArgs), their texts on stderr, exit 1."""
    code, out, err = cli("share-groups", *args)
    assert (code, out, err) == (1, "", text + "\n")


def test_share_groups_options_of_another_action_and_unknown_options_exit_1():
    code, out, _err = cli("share-groups", *NOWHERE, "--list", "--members")
    assert (code, out) == (1, "\nError: Executing share group command failed due to Option(s) [members] are "
                              "unavailable given other options on the command line\n")
    code, out, _err = cli("share-groups", *NOWHERE, "--reset-offsets", "--group", "a", "--group", "b",
                          "--all-topics", "--to-latest", "--dry-run")
    assert (code, out) == (1, "\nError: Executing share group command failed due to Found multiple arguments for "
                              "option group, but you asked for only one\n")
    code, _out, err = cli("share-groups", *NOWHERE, "--list", "--no-such-option")
    assert code == 1 and "--no-such-option" in err  # argparse's words; Kafka's tools exit 1 too


def test_describe_and_delete_all_groups_and_reset_all_topics(broker):
    for group in ("b", "a"):
        assert sg(broker, "--reset-offsets", "--group", group, "--topic", "orders", "--to-latest", "--execute")[0] == 0
    code, out, _ = sg(broker, "--describe", "--all-groups")
    assert code == 0
    assert out == ("\nGROUP           TOPIC           PARTITION  START-OFFSET  LAG"
                   "\na               orders          0          4             0"
                   "\na               orders          1          2             0\n"
                   "\nGROUP           TOPIC           PARTITION  START-OFFSET  LAG"
                   "\nb               orders          0          4             0"
                   "\nb               orders          1          2             0\n")
    code, out, _ = sg(broker, "--describe", "--group", "b", "--group", "a", "--state")
    assert [line.split()[0] for line in out.splitlines() if line and not line.startswith("GROUP")] == ["a", "b"]
    # --all-topics: every topic the group holds offsets for
    code, out, _ = sg(broker, "--reset-offsets", "--group", "a", "--all-topics", "--to-earliest", "--execute")
    assert code == 0 and [line.split()[-1] for line in out.splitlines()[2:]] == ["0", "0"]
    code, out, _ = sg(broker, "--delete", "--all-groups")
    assert (code, out) == (0, "Deletion of requested share groups ('a', 'b') was successful.\n")
    assert sg(broker, "--list") == (0, "", "")


def test_delete_of_several_groups_reports_the_deleted_ones_after_the_failures(broker):
    sg(broker, "--reset-offsets", "--group", "a", "--topic", "orders", "--to-latest", "--execute")
    code, out, _ = sg(broker, "--delete", "--group", "a", "--group", "missing")
    assert (code, out) == (0, "\nError: Deletion of some share groups failed:\n* Group 'missing' could not be "
                              "deleted due to: org.apache.kafka.common.errors.GroupIdNotFoundException: Group "
                              "'missing' is not a share group.\n\nThese share groups were deleted successfully: 'a'\n")


def test_configs_describe_and_alter_groups_topics_brokers(broker):
    base = ("configs", "--bootstrap-server", broker.bootstrap)
    code, out, _ = cli(*base, "--entity-type", "groups", "--entity-name", "g", "--alter",
                       "--add-config", "share.record.lock.duration.ms=5000,share.auto.offset.reset=earliest")
    assert (code, out) == (0, "Completed updating config for group g.\n")
    code, out, _ = cli(*base, "--entity-type", "groups", "--entity-name", "g", "--describe")
    assert out == ("Dynamic configs for group g are:\n"
                   "  share.auto.offset.reset=earliest sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:"
                   "share.auto.offset.reset=earliest, DEFAULT_CONFIG:share.auto.offset.reset=latest}\n"
                   "  share.record.lock.duration.ms=5000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:"
                   "share.record.lock.duration.ms=5000, DEFAULT_CONFIG:group.share.record.lock.duration.ms=30000}\n")
    code, out, _ = cli(*base, "--entity-type", "groups", "--entity-name", "g", "--alter",
                       "--add-config", "share.record.lock.duration.ms=10")
    assert code == 1 and out.splitlines()[1] == ("Invalid value 10 for configuration share.record.lock.duration.ms: "
                                                 "Value must be at least 1000")
    code, out, _ = cli(*base, "--entity-type", "groups", "--entity-name", "g", "--alter",
                       "--add-config", "share.delivery.count.limit=11")
    assert code == 1 and out.splitlines()[1] == ("share.delivery.count.limit must be less than or equal to "
                                                 "group.share.max.delivery.count.limit")
    code, out, _ = cli(*base, "--entity-type", "topics", "--entity-name", "orders", "--alter",
                       "--add-config", "retention.ms=60000")
    assert (code, out) == (0, "Completed updating config for topic orders.\n")
    code, out, _ = cli(*base, "--entity-type", "topics", "--entity-name", "orders", "--describe")
    assert out == ("Dynamic configs for topic orders are:\n"
                   "  retention.ms=60000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=60000}\n")
    code, out, _ = cli(*base, "--entity-type", "brokers", "--entity-name", "1", "--describe", "--all")
    assert code == 0 and "  group.share.min.record.lock.duration.ms=1000 sensitive=false" in out


@pytest.mark.parametrize("args, text", [
    (("--entity-type", "topics", "--entity-name", "t", "--describe"),
     "Either --bootstrap-server or --bootstrap-controller must be specified."),
    ((*NOWHERE, "--entity-type", "topics", "--entity-name", "t"), "Command must include exactly one action: --describe, --alter"),
    ((*NOWHERE, "--entity-type", "topics", "--entity-name", "t", "--describe", "--alter"),
     "Command must include exactly one action: --describe, --alter"),
    ((*NOWHERE, "--entity-type", "topics", "--entity-name", "t", "--describe", "--add-config", "a=1"),
     'Option "[describe]" can\'t be used with option "[add-config]"'),
    ((*NOWHERE, "--entity-name", "t", "--describe"), "At least one entity type must be specified"),
    ((*NOWHERE, "--entity-type", "tables", "--entity-name", "t", "--describe"),
     "Invalid entity type tables, the entity type must be one of topics, users, brokers, groups with a "
     "--bootstrap-server or --bootstrap-controller argument"),
    ((*NOWHERE, "--entity-type", "brokers", "--entity-name", "one", "--describe"),
     "The entity name for brokers must be a valid integer broker id, but it is: one"),
    ((*NOWHERE, "--entity-type", "topics", "--alter", "--add-config", "a=1"),
     "An entity name must be specified with --alter of topics"),
    ((*NOWHERE, "--entity-type", "brokers", "--alter", "--add-config", "a=1"),
     "An entity-name or default entity must be specified with --alter of users, clients, brokers or ips"),
    ((*NOWHERE, "--entity-type", "groups", "--entity-name", "g", "--alter"),
     "At least one of --add-config, --add-config-file, or --delete-config must be specified with --alter"),
    ((*NOWHERE, "--entity-type", "groups", "--entity-name", "g", "--alter", "--add-config", "a=1=2"),
     'Invalid entity config: all configs to be added must be in the format "key=val" or  "key=[val1,val2]" to '
     "group values which contain commas."),
    ((*NOWHERE, "--entity-type", "groups", "--entity-name", "g", "--alter", "--add-config", "a b=1"),
     "Invalid character found for config key: a b"),
])
def test_configs_usage_errors_have_kafkas_texts_and_exit_1(args, text):
    """kafka-configs.sh's option checks (ConfigCommandOptions.checkArgs, --add-config parsing), their texts
    on stderr, exit 1."""
    code, out, err = cli("configs", *args)
    assert (code, out, err) == (1, "", text + "\n")


def test_configs_add_config_groups_a_value_with_commas_in_square_brackets(broker):
    base = ("configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "topics", "--entity-name", "orders")
    code, out, _ = cli(*base, "--alter", "--add-config", "leader.replication.throttled.replicas=[0:1,1:1],retention.ms = 60000")
    assert (code, out) == (0, "Completed updating config for topic orders.\n")
    code, out, _ = cli(*base, "--describe")
    assert "  leader.replication.throttled.replicas=0:1,1:1 sensitive=false" in out and "  retention.ms=60000 sensitive=false" in out


def test_configs_describe_prints_the_synonyms_the_broker_returns_and_kafkas_filter(broker):
    """kafka-configs.sh asks with IncludeSynonyms and prints each entry's synonyms in the broker's order with
    the Java client's source names, `null` for a null value and `{}` for none; without --all it lists only
    the entity's dynamic configs (a broker given only static keys: none)."""
    base = ("configs", "--bootstrap-server", broker.bootstrap, "--describe")
    code, out, _ = cli(*base, "--entity-type", "brokers", "--entity-name", "1")
    assert (code, out) == (0, "Dynamic configs for broker 1 are:\n")
    code, out, _ = cli(*base, "--entity-type", "brokers", "--entity-name", "1", "--all")
    lines = out.splitlines()
    assert lines[0] == "All configs for broker 1 are:"
    assert ("  group.share.min.record.lock.duration.ms=1000 sensitive=false synonyms={STATIC_BROKER_CONFIG:"
            "group.share.min.record.lock.duration.ms=1000, DEFAULT_CONFIG:group.share.min.record.lock.duration.ms=15000}"
            ) in lines
    assert "  log.retention.ms=null sensitive=false synonyms={}" in lines
    assert "  ssl.key.password=null sensitive=true synonyms={}" in lines
    names = [line.strip().split("=", 1)[0] for line in lines[1:]]
    assert names == sorted(names)  # by name, as kafka-configs.sh (max.connections before max.connections.per.ip)
    code, out, _ = cli(*base, "--entity-type", "topics", "--entity-name", "orders", "--all")
    lines = out.splitlines()
    assert "  remote.storage.enable=false sensitive=false synonyms={}" in lines
    assert "  segment.bytes=1073741824 sensitive=false synonyms={DEFAULT_CONFIG:log.segment.bytes=1073741824}" in lines
    code, out, _ = cli(*base, "--entity-type", "groups", "--entity-name", "g", "--all")
    assert ("  share.isolation.level=read_uncommitted sensitive=false "
            "synonyms={DEFAULT_CONFIG:share.isolation.level=read_uncommitted}") in out.splitlines()


def test_the_real_command_line_against_serve(broker):
    done = run_cli("share-groups", "--bootstrap-server", broker.bootstrap, "--reset-offsets", "--group", "g",
                   "--topic", "orders", "--to-latest", "--execute")
    assert done.returncode == 0, done.stderr
    listed = run_cli("share-groups", "--bootstrap-server", broker.bootstrap, "--list")
    assert (listed.returncode, listed.stdout) == (0, "g\n")
    unreachable = run_cli("share-groups", "--bootstrap-server", "127.0.0.1:1", "--list")
    assert unreachable.returncode == 1 and "cannot connect to 127.0.0.1:1" in unreachable.stdout
