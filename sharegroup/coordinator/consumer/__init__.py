"""KIP-848 consumer groups: ConsumerGroupHeartbeat, the uniform and range assignors, reconciliation,
ConsumerGroupDescribe and the member-epoch checks of committed offsets."""

# Re-exported here: the group model, config, assignors and answers. The services (heartbeat,
# admin) are imported from their modules by the GroupCoordinator: they use the group store, which
# imports every group type's group.py, so importing them here would run this __init__ in an import cycle.
from .assignors import range_assign, uniform_assign
from .config import ConsumerGroupConfig
from .group import ConsumerGroupState, MemberState
from .responses import ConsumerGroupDescription, ConsumerMemberDescription

__all__ = [
    "ConsumerGroupConfig",
    "ConsumerGroupDescription",
    "ConsumerGroupState",
    "ConsumerMemberDescription",
    "MemberState",
    "range_assign",
    "uniform_assign",
]
