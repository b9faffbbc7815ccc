"""BrokerConfig (Kafka's broker keys for the share path) and the clock timers the manager sleeps on."""

from __future__ import annotations

import asyncio

import pytest

from sharegroup import BrokerConfig, ManualClock, ShareGroupConfig
from sharegroup.clock import call_at

from .conftest import run


def test_broker_config_defaults_are_kafkas_and_round_trip_through_properties():
    config = BrokerConfig()
    assert config.to_properties() == {
        "group.share.max.share.sessions": "2000",
        "group.share.partition.max.record.locks": "2000",
        "group.share.record.lock.duration.ms": "30000",
        "group.share.min.record.lock.duration.ms": "15000",
        "group.share.max.record.lock.duration.ms": "60000",
        "group.share.delivery.count.limit": "5",
        "fetch.max.bytes": "57671680",
    }
    assert BrokerConfig.from_properties(config.to_properties()) == config
    assert BrokerConfig.from_properties({"group.share.max.share.sessions": " 7 "}).max_share_sessions == 7
    assert config.share_group_config() == ShareGroupConfig()


@pytest.mark.parametrize(
    "properties, key",
    [
        ({"group.share.max.share.sessions": "0"}, "group.share.max.share.sessions"),
        ({"group.share.delivery.count.limit": "11"}, "group.share.delivery.count.limit"),
        ({"group.share.record.lock.duration.ms": "70000"}, "group.share.record.lock.duration.ms"),
        ({"group.share.partition.max.record.locks": "x"}, "group.share.partition.max.record.locks"),
        ({"group.share.max.share.session": "1"}, "group.share.max.share.session"),
        ({"fetch.max.bytes": True}, "fetch.max.bytes"),
    ],
)
def test_bad_broker_config_raises_value_error_naming_the_key(properties, key):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        BrokerConfig.from_properties(properties)


def test_manual_clock_timers_fire_in_deadline_order_inside_advance_and_can_be_cancelled():
    clock = ManualClock(100)
    fired = []
    call_at(clock, 130, lambda: fired.append(("b", clock.now_ms())))
    call_at(clock, 120, lambda: fired.append(("a", clock.now_ms())))
    cancelled = call_at(clock, 125, lambda: fired.append(("x", clock.now_ms())))
    cancelled.cancel()
    assert clock.pending_timers == 2
    clock.advance(19)
    assert fired == []
    clock.advance(20)
    assert fired == [("a", 139), ("b", 139)] and clock.pending_timers == 0
    call_at(clock, 0, lambda: fired.append(("now", clock.now_ms())))  # already due: runs at once
    assert fired[-1] == ("now", 139)


def test_call_at_on_a_clock_without_timers_uses_the_event_loop():
    class FrozenClock:
        def now_ms(self):
            return 5000

    async def main():
        fired = asyncio.Event()
        call_at(FrozenClock(), 5000, fired.set)  # due now: the loop runs it on its next turn
        await asyncio.wait_for(fired.wait(), 5)
        return fired.is_set()

    assert run(main())
