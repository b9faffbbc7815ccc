"""`sharegroup serve`: a Kafka-protocol broker around the share-group engine (layer 4: an edge).

The durable topic store lives in `topic_store` (all topics), `topic_log` (one partition's log),
`segment_files` (segment files and their batch index), `producer_state` (idempotent producers and
transactions), `record_batch` (RecordBatch v2 headers), `log_config` (Kafka's log settings) and
`topic_store_metrics` (its Prometheus collector).
"""
