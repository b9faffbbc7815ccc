"""Topic logs (layer 2): what the share-partition leader and the wire read records from, behind the
`PartitionLogs` protocol (`sharegroup.logs`).

`InMemoryPartitionLogs` keeps batch headers in memory (tests, the simulated demo). `TopicStore` is the
durable topic store of `sharegroup serve`: every topic's Kafka RecordBatch v2 bytes in segment files
(`topic_log`, `segment_files`), idempotent producers and transactions (`producer_state`), the checks a
broker makes on produce (`record_batch`, with the Cython timestamp scan `_record_scan`), and Kafka's
topic configs (`log_config`, `topic_config_defs`). It depends on layer 0 only.
"""

from .log_config import LogConfig
from .memory_logs import InMemoryPartitionLogs
from .segment_files import CorruptLogError
from .topic_store import TopicStore

__all__ = ["CorruptLogError", "InMemoryPartitionLogs", "LogConfig", "TopicStore"]
