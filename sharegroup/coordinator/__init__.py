"""The group coordinator companion (layer 3): one `GroupCoordinator` for every group type, as in Kafka.

- `share/`: share groups (KIP-932): membership by heartbeat, member and group epochs, the simple
  assignor, two-stage initialization and deletion of share-partition state through the Persister
  protocol, and the share-group admin APIs;
- `consumer/`: KIP-848 consumer groups (ConsumerGroupHeartbeat, the uniform and range assignors,
  reconciliation, describe);
- `classic/`: classic groups (JoinGroup / SyncGroup / Heartbeat / LeaveGroup) and the committed-offsets
  APIs, a component the GroupCoordinator owns;
- here, what every group type shares: `coordinator.py` (GroupCoordinator), `group_store.py` (groups
  moved only by committed records, group locks), `records.py` (Record, RecordSink), `offsets.py`
  (committed offsets), `assignment.py`, `deadlines.py`, `topics.py`, `listener.py`, `responses.py`,
  `validation.py`.

It reaches durable share-partition state only through `sharegroup.persistence.Persister`; its own
records go to a `RecordSink` (`MemoryRecordSink` unless the edges wire a durable one). A
`GroupListener` learns of members that left and of share-partition state that was reset or deleted.
"""

from .consumer import (
    ConsumerGroupConfig,
    ConsumerGroupDescription,
    ConsumerGroupState,
    ConsumerMemberDescription,
    MemberState,
    range_assign,
    uniform_assign,
)
from .coordinator import PERSISTER_ATTEMPTS, GroupCoordinator
from .listener import GroupListener
from .records import MemoryRecordSink, Record, RecordSink
from .responses import HeartbeatResult
from .share import GroupConfig, GroupDescription, GroupState, MemberDescription, OffsetInfo, simple_assign
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
