"""Static contract between twins, checked by mypy in `make test` (not collected by pytest).

Each function below only type-checks if the implementation on the right satisfies the Protocol on the
left, so a twin whose signature drifts from the contract fails `make typecheck` before any test runs.
"""

from __future__ import annotations

from persister import InMemoryPersister, LocalPersister
from sharegroup.tracker._in_flight import InFlightTracker as PureTracker
from sharegroup.tracker._native import InFlightTracker as NativeTracker
from sharegroup.logs import PartitionLogs
from sharegroup.topics.memory_logs import InMemoryPartitionLogs
from sharegroup.persistence import Persister
from sharegroup.server.api import BrokerView
from sharegroup.server.broker import Broker
from sharegroup.topics.topic_store import TopicStore
from sharegroup.tracker import InFlightTrackerProtocol


def native_tracker_meets_the_contract(tracker: NativeTracker) -> InFlightTrackerProtocol:
    return tracker


def pure_tracker_meets_the_contract(tracker: PureTracker) -> InFlightTrackerProtocol:
    return tracker


def local_persister_is_a_persister(persister: LocalPersister) -> Persister:
    return persister


def in_memory_persister_is_a_persister(persister: InMemoryPersister) -> Persister:
    return persister


def in_memory_logs_are_partition_logs(logs: InMemoryPartitionLogs) -> PartitionLogs:
    return logs


def topic_store_is_partition_logs(store: TopicStore) -> PartitionLogs:
    return store


def broker_is_a_broker_view(broker: Broker) -> BrokerView:
    return broker
