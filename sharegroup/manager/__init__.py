"""The SharePartitionManager package (layer 3): what a broker embeds to answer ShareFetch and
ShareAcknowledge as whole requests. See `manager.py` for the request path."""

from .delayed_fetch import DelayedFetchPurgatory, WaitOutcome
from .lock_timer import LockTimer
from .manager import SharePartitionManager
from .observer import GroupConfigSource, ManagerObserver
from .sessions import ShareSession, ShareSessionCache, next_epoch

__all__ = [
    "DelayedFetchPurgatory",
    "GroupConfigSource",
    "LockTimer",
    "ManagerObserver",
    "ShareSession",
    "ShareSessionCache",
    "SharePartitionManager",
    "WaitOutcome",
    "next_epoch",
]
