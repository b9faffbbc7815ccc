"""ACL bindings and binding filters with Kafka's vocabulary, ids and matching rules.

An `AclBinding` is one ACL: a resource pattern (type, name, LITERAL or PREFIXED) and an access control
entry (principal, host, operation, ALLOW or DENY). An `AclBindingFilter` selects bindings for
DescribeAcls and DeleteAcls: resource type ANY, pattern type ANY or MATCH, a null name, principal or host,
and operation or permission ANY are wildcards. MATCH selects every binding that would *apply* to the
name: the LITERAL one, the LITERAL `*` and every PREFIXED one whose name starts the filter's name.

`creation_problem` and `filter_problem` give Kafka's INVALID_REQUEST message for a binding that cannot
be created or a filter that cannot be used, or None when it is fine. Plain data: nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from ..authorization import CLUSTER_NAME, AclOperation, ResourceType

__all__ = [
    "AclBinding",
    "AclBindingFilter",
    "AclPermissionType",
    "PatternType",
    "WILDCARD_HOST",
    "WILDCARD_PRINCIPAL",
    "WILDCARD_RESOURCE",
    "creation_problem",
    "enum_or_unknown",
    "filter_problem",
]

WILDCARD_RESOURCE = "*"  # a LITERAL name matching every resource of its type
WILDCARD_PRINCIPAL = "User:*"  # an ACL principal matching every principal
WILDCARD_HOST = "*"  # an ACL host matching every client address


class PatternType(IntEnum):
    """Kafka's PatternType ids (ANY and MATCH exist only in filters)."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(IntEnum):
    """Kafka's AclPermissionType ids (ANY exists only in filters)."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def enum_or_unknown(cls: Any, code: int) -> Any:
    """The member of `cls` with this wire id, or its UNKNOWN member (Kafka's `fromCode`)."""
    try:
        return cls(int(code))
    except ValueError:
        return cls.UNKNOWN


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    """One ACL. Ordered (by resource, then entry) so listings and the durable file are deterministic."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def to_json(self) -> dict[str, str]:
        """The durable form: Kafka's enum names, so the file reads like kafka-acls output."""
        return {"resource_type": self.resource_type.name, "name": self.name, "pattern_type": self.pattern_type.name,
                "principal": self.principal, "host": self.host, "operation": self.operation.name,
                "permission": self.permission.name}

    @classmethod
    def from_json(cls, doc: Any) -> "AclBinding":
        """Parse the durable form; `ValueError` says what is wrong (and the binding must be creatable)."""
        if not isinstance(doc, dict):
            raise ValueError(f"an ACL must be an object, got {doc!r}")
        try:
            binding = cls(ResourceType[doc["resource_type"]], _text(doc, "name"), PatternType[doc["pattern_type"]],
                          _text(doc, "principal"), _text(doc, "host"), AclOperation[doc["operation"]],
                          AclPermissionType[doc["permission"]])
        except (KeyError, TypeError) as exc:
            raise ValueError(f"bad ACL {doc!r}: {exc}") from None
        problem = creation_problem(binding)
        if problem is not None:
            raise ValueError(f"bad ACL {doc!r}: {problem}")
        return binding


def _text(doc: dict[str, Any], key: str) -> str:
    value = doc[key]
    if not isinstance(value, str):
        raise TypeError(f"{key} must be a string")
    return value


def creation_problem(binding: AclBinding) -> str | None:
    """Kafka's INVALID_REQUEST message for a binding CreateAcls refuses, in Kafka's order; None if valid."""
    if binding.resource_type is ResourceType.CLUSTER and binding.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not binding.name:
        return "Invalid empty resource name"
    if binding.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {binding.resource_type.name}"
    if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {binding.pattern_type.name}"
    if binding.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {binding.operation.name}"
    if binding.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Invalid permissionType {binding.permission.name}"
    if ":" not in binding.principal:
        return (f"Could not parse principal from `{binding.principal}` (no colon is present separating the "
                "principal type from the principal name)")
    return None


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Selects ACL bindings (DescribeAcls, DeleteAcls). None and ANY are wildcards (see the module doc)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding) and self.matches_entry(binding)

    def matches_pattern(self, binding: AclBinding) -> bool:
        """Kafka's ResourcePatternFilter.matches."""
        if self.resource_type is not ResourceType.ANY and self.resource_type is not binding.resource_type:
            return False
        wanted = self.pattern_type
        if wanted not in (PatternType.ANY, PatternType.MATCH) and wanted is not binding.pattern_type:
            return False
        if self.name is None:
            return True
        if wanted is PatternType.ANY or wanted is binding.pattern_type:
            return self.name == binding.name
        if binding.pattern_type is PatternType.LITERAL:  # MATCH: the binding applies to the filter's name
            return self.name == binding.name or binding.name == WILDCARD_RESOURCE
        return self.name.startswith(binding.name)

    def matches_entry(self, binding: AclBinding) -> bool:
        """Kafka's AccessControlEntryFilter.matches."""
        if self.principal is not None and self.principal != binding.principal:
            return False
        if self.host is not None and self.host != binding.host:
            return False
        if self.operation is not AclOperation.ANY and self.operation is not binding.operation:
            return False
        return self.permission is AclPermissionType.ANY or self.permission is binding.permission


def filter_problem(acl_filter: AclBindingFilter) -> str | None:
    """Kafka's INVALID_REQUEST message for a filter with an UNKNOWN element; None when it is usable."""
    if acl_filter.resource_type is ResourceType.UNKNOWN or acl_filter.pattern_type is PatternType.UNKNOWN:
        return "Unknown patternFilter."
    if acl_filter.operation is AclOperation.UNKNOWN or acl_filter.permission is AclPermissionType.UNKNOWN:
        return "Unknown entryFilter."
    return None
