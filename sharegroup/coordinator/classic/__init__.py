"""Classic groups (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups) and their embedded consumer protocol."""
