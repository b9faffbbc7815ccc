"""ConsumerGroupHeartbeat (KIP-848) rule by rule, with Kafka's exact error codes: joins, epochs,
reconciliation (revocation before reassignment), static members, leaves, session and rebalance
timeouts, assignors, regex subscriptions, group types, describe, the offset-commit validators, and
records reloaded after a restart."""

from __future__ import annotations

import asyncio

import pytest

from sharegroup import Errors, ShareError
from sharegroup.coordinator import ConsumerGroupConfig, ConsumerGroupState, GroupCoordinator
from tests.consumer_group_env import G, T1, T2, ConsumerEnv

P = ConsumerGroupConfig()


def run(coro):
    return asyncio.run(coro)


def env(**kw) -> ConsumerEnv:
    return run(ConsumerEnv(**kw).start())


def refused(coro, error: Errors) -> ShareError:
    with pytest.raises(ShareError) as info:
        run(coro)
    assert info.value.error is error, (info.value.error, info.value.message)
    return info.value


# -- join -------------------------------------------------------------------------------------------


def test_first_member_gets_every_partition_at_epoch_1():
    e = env()
    r = run(e.join("m1"))
    assert (r.member_id, r.member_epoch, r.heartbeat_interval_ms) == ("m1", 1, 5000)
    assert r.assignment == {T1: [0, 1, 2, 3, 4, 5]}
    d = e.gc.consumer_group_describe(G)
    assert (d.state, d.group_epoch, d.assignment_epoch, d.assignor_name) == (ConsumerGroupState.STABLE, 1, 1, "uniform")


def test_v0_join_with_empty_member_id_gets_one_and_v1_is_invalid():
    e = env()
    r = run(e.hb("", 0, subscribed_topic_names=["t1"], rebalance_timeout_ms=1000, owned_topic_partitions={},
                 api_version=0))
    assert len(r.member_id) == 36 and r.member_epoch == 1
    err = refused(e.hb("", 0, subscribed_topic_names=["t1"], rebalance_timeout_ms=1000, owned_topic_partitions={}),
                  Errors.INVALID_REQUEST)
    assert err.message == "MemberId can't be empty."


@pytest.mark.parametrize("kw, message", [
    (dict(rebalance_timeout_ms=-1), "RebalanceTimeoutMs must be provided in first request."),
    (dict(owned_topic_partitions=None), "TopicPartitions must be empty when (re-)joining."),
    (dict(owned_topic_partitions={T1: [0]}), "TopicPartitions must be empty when (re-)joining."),
    (dict(subscribed_topic_names=None),
     "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
    (dict(instance_id=""), "InstanceId can't be empty."),
    (dict(rack_id=" "), "RackId can't be empty."),
])
def test_join_missing_required_fields_is_invalid_request(kw, message):
    e = env()
    args = dict(subscribed_topic_names=["t1"], rebalance_timeout_ms=1000, owned_topic_partitions={})
    args.update(kw)
    err = refused(e.hb("m1", 0, **args), Errors.INVALID_REQUEST)
    assert err.message == message
    assert e.gc.group_types() == {} and len(e.sink) == 0


def test_bad_epochs_and_ids_are_invalid_request():
    e = env()
    assert refused(e.hb("m1", -3), Errors.INVALID_REQUEST).message == "MemberEpoch is invalid."
    assert refused(e.hb("m1", -2), Errors.INVALID_REQUEST).message == "InstanceId can't be null."
    assert refused(e.hb("", 1), Errors.INVALID_REQUEST).message == "MemberId can't be empty."
    assert refused(e.gc.consumer_group_heartbeat(" ", "m1", 1), Errors.INVALID_REQUEST).message == (
        "GroupId can't be empty.")


def test_unknown_assignor_is_unsupported_assignor():
    e = env()
    err = refused(e.join("m1", server_assignor="sticky"), Errors.UNSUPPORTED_ASSIGNOR)
    assert err.message == "ServerAssignor sticky is not supported. Supported assignors: uniform, range."


def test_invalid_regex_is_invalid_regular_expression():
    e = env()
    refused(e.join("m1", subscribed_topic_regex="t("), Errors.INVALID_REGULAR_EXPRESSION)


def test_group_max_size_reached_for_a_new_member_only():
    e = env(config=ConsumerGroupConfig(max_size=2))
    run(e.join("m1"))
    run(e.join("m2"))
    err = refused(e.join("m3"), Errors.GROUP_MAX_SIZE_REACHED)
    assert err.message == "The consumer group has reached its maximum capacity of 2 members."
    assert run(e.join("m1")).member_id == "m1"  # an existing member rejoins


# -- epochs ----------------------------------------------------------------------------------------


def test_heartbeat_errors_unknown_group_member_and_fenced_epochs():
    e = env()
    assert refused(e.hb("m1", 1), Errors.GROUP_ID_NOT_FOUND).message == "Consumer group cg not found."
    r = run(e.join("m1"))
    refused(e.hb("ghost", 1), Errors.UNKNOWN_MEMBER_ID)
    refused(e.hb("m1", r.member_epoch + 1, owned_topic_partitions={}), Errors.FENCED_MEMBER_EPOCH)


def test_previous_epoch_accepted_only_with_owned_subset_of_assignment():
    e = env()
    r1 = run(e.join("m1"))
    run(e.join("m2"))  # epoch 2; m1 must revoke 3 partitions
    r1 = run(e.hb("m1", 1, owned_topic_partitions={T1: [0, 1, 2, 3, 4, 5]}))
    assert r1.member_epoch == 1  # unrevoked: stays at epoch 1
    r1 = run(e.hb("m1", 1, owned_topic_partitions={T1: [0, 1, 2]}))
    assert r1.member_epoch == 2
    # The response with epoch 2 was lost: epoch 1 with a subset of the assignment is accepted...
    assert run(e.hb("m1", 1, owned_topic_partitions={T1: [0, 1, 2]})).member_epoch == 2
    # ...but not when it claims more than its assignment, nor without owned partitions.
    refused(e.hb("m1", 1, owned_topic_partitions={T1: [0, 1, 2, 3]}), Errors.FENCED_MEMBER_EPOCH)
    refused(e.hb("m1", 1), Errors.FENCED_MEMBER_EPOCH)


# -- reconciliation ----------------------------------------------------------------------------------


def test_partitions_move_only_after_the_previous_owner_revoked_them():
    e = env()
    run(e.join("m1"))
    r2 = run(e.join("m2"))
    assert (r2.member_epoch, r2.assignment) == (2, {})  # m1 still owns everything: unreleased
    d = {m.member_id: m for m in e.gc.consumer_group_describe(G).members}
    assert d["m2"].state == "unreleased_partitions" and d["m2"].target_assignment == {T1: [3, 4, 5]}
    r1 = run(e.hb("m1", 1, owned_topic_partitions={T1: [0, 1, 2, 3, 4, 5]}))
    assert (r1.member_epoch, r1.assignment) == (1, {T1: [0, 1, 2]})
    assert e.gc.consumer_group_describe(G).state is ConsumerGroupState.RECONCILING
    # m1 has not confirmed: m2 still gets nothing, and a heartbeat without owned partitions keeps waiting.
    assert run(e.hb("m2", 2, owned_topic_partitions={})).assignment is None
    assert run(e.hb("m1", 1)).member_epoch == 1
    r1 = run(e.hb("m1", 1, owned_topic_partitions={T1: [0, 1, 2]}))
    assert (r1.member_epoch, r1.assignment) == (2, None)
    r2 = run(e.hb("m2", 2, owned_topic_partitions={}))
    assert (r2.member_epoch, r2.assignment) == (2, {T1: [3, 4, 5]})
    assert e.gc.consumer_group_describe(G).state is ConsumerGroupState.STABLE


def test_member_that_already_dropped_partitions_skips_revocation():
    e = env()
    run(e.join("m1"))
    run(e.join("m2"))
    r1 = run(e.hb("m1", 1, owned_topic_partitions={T1: [0, 1, 2]}))
    assert (r1.member_epoch, r1.assignment) == (2, {T1: [0, 1, 2]})


def test_full_request_gets_the_assignment_even_when_unchanged():
    e = env()
    r = run(e.join("m1"))
    assert run(e.hb("m1", r.member_epoch, owned_topic_partitions={T1: list(range(6))})).assignment is None
    full = run(e.hb("m1", r.member_epoch, rebalance_timeout_ms=1000, subscribed_topic_names=["t1"],
                    owned_topic_partitions={T1: list(range(6))}))
    assert full.assignment == {T1: [0, 1, 2, 3, 4, 5]}


def test_new_partitions_bump_the_epoch_and_are_assigned():
    e = env()
    r = run(e.join("m1"))
    e.topics.set_partitions("t1", 8)
    r = run(e.hb("m1", r.member_epoch, owned_topic_partitions={T1: list(range(6))}))
    assert (r.member_epoch, r.assignment) == (2, {T1: list(range(8))})


def test_subscription_change_revokes_the_dropped_topic():
    e = env(t1=2, t2=2)
    r = run(e.join("m1", topics=("t1", "t2")))
    assert r.assignment == {T1: [0, 1], T2: [0, 1]}
    r = run(e.hb("m1", 1, subscribed_topic_names=["t2"], owned_topic_partitions={T1: [0, 1], T2: [0, 1]}))
    assert (r.member_epoch, r.assignment) == (1, {T2: [0, 1]})  # t1 pending revocation
    r = run(e.hb("m1", 1, owned_topic_partitions={T2: [0, 1]}))
    assert r.member_epoch == 2


def test_regex_subscription_matches_whole_names_and_follows_new_topics():
    e = env(t1=2, t2=1)
    e.topics.create_topic("other", 3)
    r = run(e.join("m1", subscribed_topic_regex="t[0-9]"))
    assert r.assignment == {T1: [0, 1], T2: [0]}
    d = e.gc.consumer_group_describe(G).members[0]
    assert (d.subscribed_topic_regex, d.subscribed_topic_names) == ("t[0-9]", [])
    t3 = e.topics.create_topic("t3", 1)
    e.clock.advance(10_000)  # the regex is matched again at most every 10 s
    r = run(e.hb("m1", 1, owned_topic_partitions={T1: [0, 1], T2: [0]}))
    assert (r.member_epoch, r.assignment) == (2, {T1: [0, 1], T2: [0], t3.topic_id: [0]})


def test_range_assignor_when_named():
    e = env(t1=3)
    run(e.join("b", server_assignor="range"))
    run(e.join("a", server_assignor="range"))
    assert e.gc.consumer_group_describe(G).assignor_name == "range"
    targets = {m.member_id: m.target_assignment for m in e.gc.consumer_group_describe(G).members}
    assert targets == {"a": {T1: [0, 1]}, "b": {T1: [2]}}


# -- leave, static members, timeouts -------------------------------------------------------------------


def test_leave_removes_the_member_and_bumps_the_epoch():
    e = env()
    run(e.join("m1"))
    r = run(e.hb("m1", -1))
    assert r == ("m1", -1, 0, None)
    d = e.gc.consumer_group_describe(G)
    assert (d.state, d.group_epoch, d.members) == (ConsumerGroupState.EMPTY, 2, [])
    refused(e.hb("m1", -1), Errors.UNKNOWN_MEMBER_ID)


def test_static_member_rejoins_with_its_partitions_and_no_rebalance():
    e = env()
    r1 = run(e.join("a1", instance_id="i-a"))
    run(e.join("b1", instance_id="i-b"))
    run(e.hb("a1", 1, owned_topic_partitions={T1: [0, 1, 2]}))
    run(e.hb("b1", 2, owned_topic_partitions={}))
    before = e.gc.consumer_group_describe(G)
    assert before.state is ConsumerGroupState.STABLE
    r = run(e.hb("a1", -2, instance_id="i-a"))
    assert r.member_epoch == -2
    # A new process with the same instance id: same partitions, same group epoch, b untouched.
    r = run(e.join("a2", instance_id="i-a"))
    assert (r.member_id, r.member_epoch, r.assignment) == ("a2", 2, {T1: [0, 1, 2]})
    after = e.gc.consumer_group_describe(G)
    assert after.group_epoch == before.group_epoch
    assert {m.member_id: m.assignment for m in after.members} == {"a2": {T1: [0, 1, 2]}, "b1": {T1: [3, 4, 5]}}
    del r1


def test_static_member_errors():
    e = env()
    run(e.join("a1", instance_id="i-a"))
    err = refused(e.join("a2", instance_id="i-a"), Errors.UNRELEASED_INSTANCE_ID)
    assert err.message == ("Static member a2 with instance id i-a cannot join the group because the instance id is "
                           "owned by a1 member.")  # Kafka's words
    fenced = "Static member a2 with instance id i-a was fenced by member a1."  # Kafka's words
    assert refused(e.hb("a2", 1, instance_id="i-a"), Errors.FENCED_INSTANCE_ID).message == fenced
    refused(e.hb("a1", 1, instance_id="i-z"), Errors.UNKNOWN_MEMBER_ID)
    assert refused(e.hb("a2", -1, instance_id="i-a"), Errors.FENCED_INSTANCE_ID).message == fenced


def test_a_static_member_rejoining_under_its_own_id_without_leaving_is_unreleased():
    # Kafka replaces a static member on an epoch-0 join only after it left with epoch -2, whatever the
    # member id of the join: the same id is refused too, and nothing changes.
    e = env()
    joined = run(e.join("a1", instance_id="i-a"))
    before = e.gc.consumer_group_describe(G)
    records = len(e.sink)
    refused(e.join("a1", instance_id="i-a"), Errors.UNRELEASED_INSTANCE_ID)
    assert e.gc.consumer_group_describe(G) == before and len(e.sink) == records
    assert run(e.hb("a1", joined.member_epoch, instance_id="i-a")).member_epoch == joined.member_epoch
    run(e.hb("a1", -2, instance_id="i-a"))
    assert run(e.join("a1", instance_id="i-a")).member_id == "a1"  # released: it may come back


def test_static_member_that_left_is_removed_after_its_session_timeout():
    e = env()
    run(e.join("a1", instance_id="i-a"))
    run(e.hb("a1", -2, instance_id="i-a"))
    e.clock.advance(P.session_timeout_ms)
    assert run(e.gc.expire_members()) == ["a1"]
    assert e.gc.consumer_group_describe(G).members == []


def test_session_timeout_removes_the_member_and_frees_its_partitions():
    e = env()
    run(e.join("m1"))
    e.clock.advance(P.session_timeout_ms - 1)
    r2 = run(e.join("m2"))
    assert r2.assignment == {}
    e.clock.advance(1)
    r2 = run(e.hb("m2", r2.member_epoch, owned_topic_partitions={}))
    assert (r2.member_epoch, r2.assignment) == (3, {T1: [0, 1, 2, 3, 4, 5]})
    assert [m.member_id for m in e.gc.consumer_group_describe(G).members] == ["m2"]


def test_member_that_does_not_revoke_within_its_rebalance_timeout_is_removed():
    e = env()
    run(e.join("m1", rebalance_timeout_ms=2000))
    run(e.join("m2"))
    run(e.hb("m1", 1, owned_topic_partitions={T1: list(range(6))}))  # now unrevoked, timer of 2 s
    e.clock.advance(1999)
    run(e.hb("m1", 1, owned_topic_partitions={T1: list(range(6))}))  # heartbeats, still not revoking
    assert run(e.gc.expire_members()) == []
    e.clock.advance(1)
    assert run(e.gc.expire_members()) == ["m1"]
    r2 = run(e.hb("m2", 2, owned_topic_partitions={}))
    assert (r2.member_epoch, r2.assignment) == (3, {T1: [0, 1, 2, 3, 4, 5]})


def test_rebalance_timeout_does_not_fire_once_revoked():
    e = env()
    run(e.join("m1", rebalance_timeout_ms=2000))
    run(e.join("m2"))
    run(e.hb("m1", 1, owned_topic_partitions={T1: list(range(6))}))
    run(e.hb("m1", 1, owned_topic_partitions={T1: [0, 1, 2]}))
    e.clock.advance(5000)
    assert run(e.gc.expire_members()) == []


# -- group types, describe, validators -----------------------------------------------------------------


def test_group_types_clash_as_in_kafka():
    e = env()
    run(e.join("m1"))
    err = refused(e.gc.share_group_heartbeat(G, "s1", 0, ["t1"]), Errors.GROUP_ID_NOT_FOUND)
    assert err.message == "Group cg is not a share group."
    run(e.gc.share_group_heartbeat("sg", "s1", 0, ["t1"]))
    err = refused(e.join("m1", group="sg"), Errors.GROUP_ID_NOT_FOUND)
    assert err.message == "Group sg is not a consumer group."
    with pytest.raises(ShareError) as info:
        e.gc.consumer_group_describe("sg")
    assert info.value.error is Errors.GROUP_ID_NOT_FOUND
    with pytest.raises(ShareError) as info:
        e.gc.describe_group(G)
    assert info.value.error is Errors.GROUP_ID_NOT_FOUND
    assert e.gc.group_types() == {G: "consumer", "sg": "share"}
    assert e.gc.group_ids == ["sg"] and e.gc.is_consumer_group(G) and not e.gc.is_consumer_group("sg")


def test_describe_errors():
    e = env()
    for group_id, error in (("", Errors.INVALID_GROUP_ID), ("nope", Errors.GROUP_ID_NOT_FOUND)):
        with pytest.raises(ShareError) as info:
            e.gc.consumer_group_describe(group_id)
        assert info.value.error is error


def test_validate_offset_commit_and_fetch():
    e = env()
    run(e.join("m1"))
    e.gc.validate_offset_commit(G, "m1", 1)
    # Kafka compares the epoch for equality: a greater one is STALE_MEMBER_EPOCH too.
    for member, epoch, error in (("m1", 2, Errors.STALE_MEMBER_EPOCH), ("m1", 0, Errors.STALE_MEMBER_EPOCH),
                                 ("ghost", 1, Errors.UNKNOWN_MEMBER_ID), ("", -1, Errors.UNKNOWN_MEMBER_ID)):
        with pytest.raises(ShareError) as info:
            e.gc.validate_offset_commit(G, member, epoch)
        assert info.value.error is error, (member, epoch)
    e.gc.validate_offset_fetch(G, None, -1)
    with pytest.raises(ShareError) as info:
        e.gc.validate_offset_fetch(G, "m1", 2)
    assert info.value.error is Errors.STALE_MEMBER_EPOCH
    run(e.hb("m1", -1))
    e.gc.validate_offset_commit(G, "", -1)  # an admin commit to an empty group


def test_delete_group_only_when_empty():
    e = env()
    run(e.join("m1"))
    with pytest.raises(ShareError) as info:
        run(e.gc.delete_group(G))
    assert info.value.error is Errors.GROUP_NOT_EMPTY
    run(e.hb("m1", -1))
    run(e.gc.delete_group(G))
    assert e.gc.group_types() == {}
    e.gc._check(replay=True)


# -- durability ----------------------------------------------------------------------------------------


def test_records_reload_into_the_same_groups_with_fresh_sessions():
    e = env(t1=4, t2=2)
    run(e.join("m1", topics=("t1", "t2"), instance_id="i1"))
    run(e.join("m2", subscribed_topic_regex="t2"))
    run(e.hb("m1", 1, owned_topic_partitions={T1: [0, 1, 2, 3], T2: [0, 1]}))
    e.gc._check(replay=True)
    restarted = GroupCoordinator(persister=e.gc._lifecycle.persister, topics=e.topics, clock=e.clock,
                                 record_sink=e.sink)
    run(restarted.load())
    restarted._check()
    assert restarted._dump() == e.gc._dump()
    d = restarted.consumer_group_describe(G)
    assert {m.member_id: m.instance_id for m in d.members} == {"m1": "i1", "m2": None}
    e.clock.advance(P.session_timeout_ms)
    assert sorted(run(restarted.expire_members())) == ["m1", "m2"]


def test_failed_append_changes_nothing():
    e = env()
    run(e.join("m1"))
    before = e.gc._dump()
    e.sink.fail_next_appends(1)
    refused(e.join("m2"), Errors.NOT_COORDINATOR)
    assert e.gc._dump() == before


def test_regex_no_member_uses_any_more_is_dropped():
    e = env(t1=2, t2=1)
    run(e.join("m1", subscribed_topic_regex="t1"))
    assert set(e.gc._store.groups[G].regexes) == {"t1"}
    r = run(e.hb("m1", 1, subscribed_topic_regex="t2", owned_topic_partitions={T1: [0, 1]}))
    assert set(e.gc._store.groups[G].regexes) == {"t2"} and r.assignment == {}
    r = run(e.hb("m1", 1, owned_topic_partitions={}))
    assert (r.member_epoch, r.assignment) == (2, {T2: [0]})
    e.gc._check(replay=True)


def test_static_member_that_left_may_rejoin_under_its_own_member_id():
    e = env()
    run(e.join("a1", instance_id="i-a"))
    run(e.hb("a1", -2, instance_id="i-a"))
    r = run(e.join("a1", instance_id="i-a"))
    assert (r.member_id, r.member_epoch, r.assignment) == ("a1", 1, {T1: [0, 1, 2, 3, 4, 5]})
    r = run(e.join("a1"))  # without its instance id: found by member id
    assert (r.member_id, r.member_epoch) == ("a1", 1)


def test_rebalance_timeout_restarts_after_a_restart():
    e = env()
    run(e.join("m1", rebalance_timeout_ms=2000))
    run(e.join("m2"))
    run(e.hb("m1", 1, owned_topic_partitions={T1: list(range(6))}))  # unrevoked
    restarted = GroupCoordinator(persister=e.gc._lifecycle.persister, topics=e.topics, clock=e.clock,
                                 record_sink=e.sink)
    e.clock.advance(1000)
    run(restarted.load())
    restarted._check()
    e.clock.advance(1999)
    assert run(restarted.expire_members()) == []
    e.clock.advance(1)
    assert run(restarted.expire_members()) == ["m1"]
