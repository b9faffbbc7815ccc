"""One module per API family; each exports `HANDLERS` (a tuple of `ApiHandler`).

To add an API family: write its module and add it to `HANDLER_MODULES` below (one line).

A handler is given the broker as an `api.BrokerView` (it imports `api`, never `broker`) and the decoded
kio request of one of the versions it serves. Each version is its own kio class, so a field that only
some versions have is read with `getattr(request, name, default)`: that probes kio's message classes,
not our objects.
"""

from __future__ import annotations

from ..api import ApiHandler
from . import (
    acls,
    api_versions,
    classic_group,
    committed_offsets,
    configs,
    consumer_group,
    create_partitions,
    fetch,
    find_coordinator,
    group_admin,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
    sasl,
    scram_credentials,
    share_fetch,
    share_group,
    topic_deletion,
    topics,
    transaction_admin,
    transactions,
    write_txn_markers,
)

__all__ = ["HANDLER_MODULES", "all_handlers"]

HANDLER_MODULES = (
    api_versions,
    metadata,
    find_coordinator,
    produce,
    init_producer_id,
    topics,
    fetch,
    share_group,
    share_fetch,
    group_admin,
    topic_deletion,
    create_partitions,
    configs,
    list_offsets,
    acls,
    sasl,
    scram_credentials,
    classic_group,
    committed_offsets,
    consumer_group,
    transactions,
    transaction_admin,
    write_txn_markers,
)


def all_handlers() -> list[ApiHandler]:
    return [handler for module in HANDLER_MODULES for handler in module.HANDLERS]
