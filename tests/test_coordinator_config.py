"""GroupConfig: Kafka's defaults and bounds, errors naming the Kafka key, property names."""

from __future__ import annotations

import pytest

from sharegroup.coordinator import GroupConfig


def test_defaults_are_kafkas():
    c = GroupConfig()
    assert (c.max_size, c.session_timeout_ms, c.heartbeat_interval_ms, c.assignment_interval_ms) == (
        200,
        45_000,
        5_000,
        1_000,
    )


@pytest.mark.parametrize(
    "field, value, key",
    [
        ("max_size", 0, "group.share.max.size"),
        ("max_size", 1001, "group.share.max.size"),
        ("max_size", True, "group.share.max.size"),
        ("max_size", "200", "group.share.max.size"),
        ("session_timeout_ms", 44_999, "group.share.session.timeout.ms"),
        ("session_timeout_ms", 60_001, "group.share.session.timeout.ms"),
        ("heartbeat_interval_ms", 4_999, "group.share.heartbeat.interval.ms"),
        ("heartbeat_interval_ms", 15_001, "group.share.heartbeat.interval.ms"),
        ("assignment_interval_ms", -1, "group.share.assignment.interval.ms"),
        ("assignment_interval_ms", 15_001, "group.share.assignment.interval.ms"),
        ("assignment_interval_ms", 1.5, "group.share.assignment.interval.ms"),
    ],
)
def test_out_of_bounds_values_name_the_kafka_key(field, value, key):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        GroupConfig(**{field: value})


def test_bounds_are_inclusive():
    GroupConfig(max_size=1, session_timeout_ms=45_000, heartbeat_interval_ms=5_000, assignment_interval_ms=0)
    GroupConfig(max_size=1000, session_timeout_ms=60_000, heartbeat_interval_ms=15_000, assignment_interval_ms=15_000)


def test_from_and_to_properties():
    c = GroupConfig.from_properties(
        {
            "group.share.max.size": "50",
            "group.share.session.timeout.ms": 50_000,
            "group.share.assignment.interval.ms": " 0 ",
        }
    )
    assert (c.max_size, c.session_timeout_ms, c.assignment_interval_ms) == (50, 50_000, 0)
    assert GroupConfig.from_properties(c.to_properties()) == c
    with pytest.raises(ValueError, match="group.share.max.sizes"):
        GroupConfig.from_properties({"group.share.max.sizes": 1})
    with pytest.raises(ValueError, match=r"group\.share\.max\.size"):
        GroupConfig.from_properties({"group.share.max.size": "lots"})
    with pytest.raises(ValueError, match=r"group\.share\.max\.size"):
        GroupConfig.from_properties({"group.share.max.size": True})
