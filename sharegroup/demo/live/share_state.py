"""Share state on a Kafka cluster (the live demo's `--share-state kafka://host:port[/topic]`): the URL's
check, and the read-only copy of the topic's state log that the durable-state check and the audit read.
"""

from __future__ import annotations

import os
from typing import Callable

from ..errors import DemoError

__all__ = ["check_share_state_url", "copy_share_state"]


def check_share_state_url(url: str) -> None:
    """ValueError unless `url` is `kafka://host:port[,host:port...][/topic]` (what serve accepts)."""
    from persister.kafka_persister import parse_kafka_url

    parse_kafka_url(url)


def copy_share_state(url: str, copy_dir: str, print_fn: Callable[[str], None]) -> str:
    """Copy the state log in the Kafka topic of `url` (partition 0, the one shard serve writes) into
    the segment directory `copy_dir`, replacing an earlier copy; the topic is only read (its owner is
    not fenced). Returns `copy_dir`; DemoError when the topic cannot be read (the live demo reports
    that as a durable-state problem and skips the audit)."""
    import shutil

    from persister.kafka_state_log import DEFAULT_STATE_TOPIC, export_to_segment_dir
    from persister.kafka_persister import parse_kafka_url

    servers, topic = parse_kafka_url(url)
    if os.path.isdir(copy_dir):
        shutil.rmtree(copy_dir)
    try:
        copied = export_to_segment_dir(servers, topic or DEFAULT_STATE_TOPIC, 0, copy_dir,
                                       client_config={"log_level": 3})
    except Exception as exc:  # the cluster is gone, the topic is missing or unreadable
        raise DemoError(f"cannot read the share state back from {url}: {exc}") from exc
    print_fn(f"share state: {copied:,} state-log records copied from {url} into {copy_dir}")
    return copy_dir
