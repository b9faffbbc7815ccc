"""What a handler asks before it acts: may this principal do this operation on this resource?

Kafka's authorization vocabulary (operation and resource-type ids as on the wire, in CreateAcls and
DescribeAcls) and the `Authorizer` protocol every handler goes through via `RequestContext.authorized`.
Without `authorizer.class.name` the broker uses `AllowEveryone`, so a broker without security settings
behaves as if no check existed. The ACL-based authorizer implements the same protocol.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Protocol, runtime_checkable

__all__ = [
    "ANONYMOUS",
    "AclOperation",
    "AllowEveryone",
    "Authorizer",
    "CLUSTER_NAME",
    "ResourceType",
    "SUPPORTED_OPERATIONS",
]

ANONYMOUS = "User:ANONYMOUS"  # the principal of a PLAINTEXT connection (and of SSL without a client certificate)
CLUSTER_NAME = "kafka-cluster"  # the one name of the CLUSTER resource


class AclOperation(IntEnum):
    """Kafka's AclOperation ids."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class ResourceType(IntEnum):
    """Kafka's ResourceType ids (of ACLs; DescribeConfigs numbers its config resources differently)."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


# The operations that apply to each resource type (what an `authorized_operations` bit field reports).
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                         AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                           AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE, AclOperation.TWO_PHASE_COMMIT),
}


@runtime_checkable
class Authorizer(Protocol):
    """Decides one action on one literal resource name for one principal connected from `host` (an IP).

    `authorize_by_resource_type` answers "may this principal do `operation` on *some* resource of this
    type" (Kafka's `authorizeByResourceType`, used by InitProducerId: WRITE on any topic).
    """

    def authorize(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool: ...

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool: ...


class AllowEveryone:
    """The authorizer of a broker without `authorizer.class.name`: every action is allowed."""

    def authorize(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        return True

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        return True
