"""Share groups (KIP-932): membership by heartbeat, the simple assignor, share-partition state and the share-group admin APIs."""
