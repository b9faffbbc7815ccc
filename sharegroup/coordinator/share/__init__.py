"""Share groups (KIP-932): membership by ShareGroupHeartbeat, the simple assignor, share-partition state
through the Persister, and the share-group admin APIs."""

# Re-exported here: the group model, config and answers. The services (heartbeat.Membership,
# admin.ShareGroupAdmin, partition_lifecycle.PartitionStateLifecycle) are imported from their modules
# by the GroupCoordinator: they use the group store, which imports every group type's group.py, so
# importing them here would run this __init__ in an import cycle.
from .assignor import simple_assign
from .config import GroupConfig
from .group import GroupState
from .responses import GroupDescription, MemberDescription, OffsetInfo

__all__ = ["GroupConfig", "GroupDescription", "GroupState", "MemberDescription", "OffsetInfo", "simple_assign"]
