"""Classic groups (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups: Kafka's rebalance state
machine with static membership), their embedded consumer protocol, and the committed-offsets APIs, all
of which the GroupCoordinator delegates to `coordinator.ClassicCoordinator`."""

# Re-exported here: the config, the embedded consumer protocol and the answers. The services
# (coordinator.ClassicCoordinator, protocol, rebalance) are imported from their modules by the
# GroupCoordinator: they use the group store, which imports every group type's group.py, so importing
# them here would run this __init__ in an import cycle.
from .config import ClassicGroupConfig
from .consumer_protocol import decode_assignment, encode_assignment, encode_subscription, subscribed_topics
from .responses import (
    ClassicGroupDescription,
    ClassicMemberDescription,
    CommittedOffset,
    GroupListing,
    JoinGroupResult,
    LeaveMemberResult,
    SyncGroupResult,
)

__all__ = [
    "ClassicGroupConfig",
    "ClassicGroupDescription",
    "ClassicMemberDescription",
    "CommittedOffset",
    "GroupListing",
    "JoinGroupResult",
    "LeaveMemberResult",
    "SyncGroupResult",
    "decode_assignment",
    "encode_assignment",
    "encode_subscription",
    "subscribed_topics",
]
