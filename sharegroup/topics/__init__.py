"""Topic logs (layer 2): what the share-partition leader and the wire read records from, behind the
`PartitionLogs` protocol (`sharegroup.logs`). `InMemoryPartitionLogs` keeps batch headers in memory (tests,
the simulated demo); the durable topic store of `sharegroup serve` keeps Kafka record batches in segment
files."""

from .memory_logs import InMemoryPartitionLogs

__all__ = ["InMemoryPartitionLogs"]
