"""Layer 0: enums carry Kafka's numbers, configuration follows Kafka's keys, defaults and ranges."""

from __future__ import annotations

import pickle

import pytest

from sharegroup import AcknowledgeType, Errors, ManualClock, RecordState, ShareError, ShareGroupConfig, SystemClock
from sharegroup.config import parse_iso8601_duration_ms


def test_record_state_and_acknowledge_type_ids_are_kafkas():
    assert [(s.name, int(s)) for s in RecordState] == [
        ("AVAILABLE", 0), ("ACQUIRED", 1), ("ACKNOWLEDGED", 2), ("ARCHIVING", 3), ("ARCHIVED", 4)]
    assert [(t.name, int(t)) for t in AcknowledgeType] == [
        ("GAP", 0), ("ACCEPT", 1), ("RELEASE", 2), ("REJECT", 3), ("RENEW", 4)]
    assert RecordState.ARCHIVED.terminal and not RecordState.ACQUIRED.terminal
    assert not RecordState.ARCHIVING.terminal  # it holds the start offset until its DLQ write is done


def test_pure_twin_record_states_equal_the_python_enum():
    from sharegroup.tracker import _in_flight_entry as entry

    assert (entry.AVAILABLE, entry.ACQUIRED, entry.ACKNOWLEDGED, entry.ARCHIVING, entry.ARCHIVED) == tuple(RecordState)


def _native_tracker_module():
    """The compiled tracker module when this pass loaded it; skip (saying why) in the pure pass."""
    from sharegroup import tracker

    if not tracker.NATIVE:
        pytest.skip("pure-Python pass (SHAREGROUP_PUREPYTHON=1): the native tracker module is not loaded, "
                    "so its compiled constants are checked in the native pass")
    from sharegroup.tracker import _native as native

    return native


def test_native_record_state_ids_equal_the_python_enum():
    native = _native_tracker_module()
    assert native.record_state_ids() == tuple(int(s) for s in RecordState) == (0, 1, 2, 3, 4)


def test_native_acknowledge_type_ids_equal_the_python_enum():
    native = _native_tracker_module()
    assert native.acknowledge_type_ids() == tuple(int(t) for t in AcknowledgeType) == (0, 1, 2, 3, 4)


@pytest.mark.parametrize("name,code", [
    ("NONE", 0), ("UNKNOWN_SERVER_ERROR", -1), ("UNKNOWN_TOPIC_OR_PARTITION", 3), ("LEADER_NOT_AVAILABLE", 5),
    ("NOT_LEADER_OR_FOLLOWER", 6), ("COORDINATOR_LOAD_IN_PROGRESS", 14), ("COORDINATOR_NOT_AVAILABLE", 15),
    ("NOT_COORDINATOR", 16), ("UNKNOWN_MEMBER_ID", 25), ("INVALID_REQUEST", 42), ("KAFKA_STORAGE_ERROR", 56),
    ("GROUP_NOT_EMPTY", 68), ("GROUP_ID_NOT_FOUND", 69), ("FENCED_LEADER_EPOCH", 74),
    ("GROUP_MAX_SIZE_REACHED", 81), ("FENCED_MEMBER_EPOCH", 110), ("INVALID_RECORD_STATE", 121),
    ("SHARE_SESSION_NOT_FOUND", 122), ("INVALID_SHARE_SESSION_EPOCH", 123), ("FENCED_STATE_EPOCH", 124),
])
def test_error_codes_are_kafkas(name, code):
    assert Errors[name] == code


def test_share_error_carries_code_and_message_and_pickles():
    e = ShareError(Errors.INVALID_RECORD_STATE, "offset 5 is AVAILABLE")
    assert e.error is Errors.INVALID_RECORD_STATE and e.message == "offset 5 is AVAILABLE"
    assert "INVALID_RECORD_STATE" in str(e)
    e2 = pickle.loads(pickle.dumps(e))
    assert (e2.error, e2.message) == (e.error, e.message)
    assert ShareError(121).error is Errors.INVALID_RECORD_STATE


def test_config_defaults_are_kafkas():
    c = ShareGroupConfig()
    assert (c.record_lock_duration_ms, c.delivery_count_limit, c.partition_max_record_locks) == (30000, 5, 2000)
    assert (c.auto_offset_reset, c.isolation_level, c.acquire_mode) == ("latest", "read_uncommitted", "batch_optimized")


@pytest.mark.parametrize("field,value,key", [
    ("record_lock_duration_ms", 999, "group.share.record.lock.duration.ms"),
    ("record_lock_duration_ms", 3_600_001, "group.share.record.lock.duration.ms"),
    ("delivery_count_limit", 1, "group.share.delivery.count.limit"),
    ("delivery_count_limit", 11, "group.share.delivery.count.limit"),
    ("partition_max_record_locks", 99, "group.share.partition.max.record.locks"),
    ("partition_max_record_locks", 10_001, "group.share.partition.max.record.locks"),
    ("delivery_count_limit", "5", "group.share.delivery.count.limit"),
    ("delivery_count_limit", True, "group.share.delivery.count.limit"),
    ("auto_offset_reset", "newest", "share.auto.offset.reset"),
    ("auto_offset_reset", "by_duration:1h", "share.auto.offset.reset"),
    ("isolation_level", "serializable", "share.isolation.level"),
    ("acquire_mode", "greedy", "share.acquire.mode"),
])
def test_config_out_of_range_names_the_kafka_key(field, value, key):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        ShareGroupConfig(**{field: value})


def test_config_bounds_are_inclusive():
    ShareGroupConfig(record_lock_duration_ms=1000, delivery_count_limit=2, partition_max_record_locks=100)
    ShareGroupConfig(record_lock_duration_ms=3_600_000, delivery_count_limit=10, partition_max_record_locks=10_000)


def test_config_from_kafka_properties():
    c = ShareGroupConfig.from_properties({
        "group.share.record.lock.duration.ms": "15000",
        "group.share.delivery.count.limit": 4,
        "share.delivery.count.limit": "3",  # the group-level key wins over the broker key
        "share.auto.offset.reset": "by_duration:PT2H",
        "share.isolation.level": "READ_COMMITTED",
        "share.acquire.mode": "record_limit",
    })
    assert (c.record_lock_duration_ms, c.delivery_count_limit) == (15000, 3)
    assert c.auto_offset_reset_duration_ms == 2 * 3600 * 1000
    assert c.read_committed and c.acquire_mode == "record_limit"
    assert ShareGroupConfig.from_properties(c.to_properties()) == c


@pytest.mark.parametrize("props,match", [
    ({"group.share.lock.ms": "1"}, "unknown share-group property"),
    ({"group.share.delivery.count.limit": "five"}, "must be an integer"),
    ({"share.partition.max.record.locks": "50"}, "share.partition.max.record.locks|partition.max.record.locks"),
])
def test_config_from_bad_properties(props, match):
    with pytest.raises(ValueError, match=match):
        ShareGroupConfig.from_properties(props)


@pytest.mark.parametrize("text,ms", [("PT1S", 1000), ("PT1.5S", 1500), ("PT2M", 120000), ("P1D", 86_400_000),
                                     ("P1DT1H", 90_000_000), ("pt30m", 1_800_000)])
def test_iso8601_durations(text, ms):
    assert parse_iso8601_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "P", "PT", "1H", "P1Y", "PT-1S", "P1DT"])
def test_bad_iso8601_durations(text):
    with pytest.raises(ValueError):
        parse_iso8601_duration_ms(text)


def test_clocks():
    c = ManualClock(5)
    assert c.now_ms() == 5 and c.advance(10) == 15 and c.now_ms() == 15
    with pytest.raises(ValueError):
        c.advance(-1)
    assert SystemClock().now_ms() > 1_600_000_000_000
