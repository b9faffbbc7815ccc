"""The group coordinator companion (layer 3): share-group membership by heartbeat, member and group
epochs, the simple assignor, KIP-848 consumer groups (ConsumerGroupHeartbeat, the uniform and range
assignors, reconciliation), two-stage initialization and deletion of share-partition state through the
Persister protocol, group records, and the admin offsets APIs.

It reaches durable share-partition state only through `sharegroup.persistence.Persister`; its own
records go to a `RecordSink` (`MemoryRecordSink` unless the edges wire a durable one). A
`GroupListener` learns of members that left and of share-partition state that was reset or deleted.
"""

from .share.assignor import simple_assign
from .share.config import GroupConfig
from .consumer.admin import ConsumerGroupDescription, ConsumerMemberDescription
from .consumer.assignors import range_assign, uniform_assign
from .consumer.config import ConsumerGroupConfig
from .consumer.group import ConsumerGroupState, MemberState
from .coordinator import PERSISTER_ATTEMPTS, GroupCoordinator
from .share.group import GroupState
from .listener import GroupListener
from .records import MemoryRecordSink, Record, RecordSink
from .responses import HeartbeatResult
from .share.responses import GroupDescription, MemberDescription, OffsetInfo
from .topics import InMemoryTopics, TopicInfo, TopicsLookup

__all__ = [
    "ConsumerGroupConfig",
    "ConsumerGroupDescription",
    "ConsumerGroupState",
    "ConsumerMemberDescription",
    "MemberState",
    "range_assign",
    "uniform_assign",
    "GroupConfig",
    "GroupCoordinator",
    "GroupDescription",
    "GroupListener",
    "GroupState",
    "HeartbeatResult",
    "InMemoryTopics",
    "MemberDescription",
    "MemoryRecordSink",
    "OffsetInfo",
    "PERSISTER_ATTEMPTS",
    "Record",
    "RecordSink",
    "TopicInfo",
    "TopicsLookup",
    "simple_assign",
]
