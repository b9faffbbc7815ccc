"""The ACL authorizer of `sharegroup serve`, with the semantics of Kafka's StandardAuthorizer.

Enabled by `authorizer.class.name` (Kafka's `org.apache.kafka.metadata.authorizer.StandardAuthorizer`
or the older `kafka.security.authorizer.AclAuthorizer`; both mean this class). A decision for one
principal, connected from one host (an IP), doing one operation on one literal resource name:

1. a principal listed in `super.users` (`User:admin;User:ops`) is allowed everything, DENY ACLs included;
2. the ACLs that *apply* are those on the resource's type whose pattern is the LITERAL name, the LITERAL
   `*`, or PREFIXED with a prefix of the name; of those, the ones *matching* the request have the
   principal or `User:*`, the host or `*`, and the operation, ALL, or (ALLOW only) an operation that
   implies it: READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS;
3. any matching DENY -> denied (DENY always wins, whatever its pattern); else any matching ALLOW ->
   allowed; else, if any ACL applies to the resource at all (for anyone, any operation) -> denied;
   else `allow.everyone.if.no.acl.found` (default false) decides.

Cost: ACLs are indexed by (resource type, LITERAL name) and (resource type, PREFIXED name), and the
distinct prefix lengths of each type are kept sorted, so an uncached decision is O(p + m) where p is the
number of distinct prefix lengths of that type (dictionary look-ups, never a scan of all ACLs) and m the
number of ACLs that apply to the resource. Decisions are cached per (principal, host, operation, type,
name), so a repeated check is one dictionary look-up; the cache is emptied on every ACL change and when
it reaches `CACHE_MAX_ENTRIES`. `authorize_by_resource_type` scans the ACLs of one type (InitProducerId
only) and is cached the same way.

ACL changes (CreateAcls, DeleteAcls) are made durable through `AclStore` before they take effect, one
change at a time.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..authorization import AclOperation, AllowEveryone, Authorizer, ResourceType
from ..broker_config import AUTHORIZER_CLASS_NAMES, ServeConfig, parse_super_users
from .acl_store import AclStore
from .acls import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclBinding,
    AclBindingFilter,
    AclPermissionType,
    PatternType,
    creation_problem,
    filter_problem,
)

__all__ = ["StandardAuthorizer", "authorizer_for"]

ALL, DESCRIBE, DESCRIBE_CONFIGS = AclOperation.ALL, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                              AclOperation.ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})
_HARDCODED_NAME = "hardcode"  # Kafka's probe name for "allowed whatever the resource" (super users, defaults)

Entry = tuple[str, str, AclOperation, AclPermissionType]  # principal, host, operation, permission


class StandardAuthorizer:
    """ACLs in memory (indexed) and on disk; decides `authorize` with Kafka's StandardAuthorizer rules."""

    CACHE_MAX_ENTRIES = 65_536

    def __init__(
        self,
        acls: Iterable[AclBinding] = (),
        *,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
        store: AclStore | None = None,
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._store = store
        self._lock = asyncio.Lock()
        self._install(frozenset(acls))

    @classmethod
    def open(cls, data_dir: Path | str, config: ServeConfig) -> "StandardAuthorizer":
        """The authorizer of a data directory: its stored ACLs and the broker's settings."""
        store = AclStore(data_dir)
        return cls(store.load(), super_users=parse_super_users(config["super.users"]),
                   allow_everyone_if_no_acl_found=config["allow.everyone.if.no.acl.found"], store=store)

    # -- the index -------------------------------------------------------------------------------------

    def _install(self, acls: frozenset[AclBinding]) -> None:
        """Make `acls` the current ACLs: rebuild the index, empty the decision cache."""
        literal: dict[tuple[ResourceType, str], list[Entry]] = {}
        prefixed: dict[tuple[ResourceType, str], list[Entry]] = {}
        lengths: dict[ResourceType, set[int]] = {}
        by_type: dict[ResourceType, list[AclBinding]] = {}
        for b in sorted(acls):
            entry = (b.principal, b.host, b.operation, b.permission)
            if b.pattern_type is PatternType.PREFIXED:
                prefixed.setdefault((b.resource_type, b.name), []).append(entry)
                lengths.setdefault(b.resource_type, set()).add(len(b.name))
            else:
                literal.setdefault((b.resource_type, b.name), []).append(entry)
            by_type.setdefault(b.resource_type, []).append(b)
        self._acls = acls
        self._literal = {k: tuple(v) for k, v in literal.items()}
        self._prefixed = {k: tuple(v) for k, v in prefixed.items()}
        self._prefix_lengths = {k: tuple(sorted(v)) for k, v in lengths.items()}
        self._by_type = {k: tuple(v) for k, v in by_type.items()}
        self._cache: dict[tuple[Any, ...], bool] = {}
        self._check()

    def _check(self) -> None:
        """The index holds every ACL exactly once, and every ACL is one CreateAcls would accept."""
        assert sum(map(len, self._literal.values())) + sum(map(len, self._prefixed.values())) == len(self._acls)
        assert sum(map(len, self._by_type.values())) == len(self._acls)
        for rt, lens in self._prefix_lengths.items():
            assert list(lens) == sorted(set(lens)) and all(n > 0 for n in lens), (rt, lens)
        assert len(self._cache) <= self.CACHE_MAX_ENTRIES
        for b in self._acls:
            assert creation_problem(b) is None, b

    def __len__(self) -> int:
        return len(self._acls)

    # -- decisions -------------------------------------------------------------------------------------

    def authorize(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        if principal in self.super_users:
            return True
        key = (principal, host, operation, resource_type, name)
        cache = self._cache
        decision = cache.get(key)
        if decision is None:
            decision = self._decide(principal, host, operation, resource_type, name)
            if len(cache) >= self.CACHE_MAX_ENTRIES:
                cache.clear()
            cache[key] = decision
        return decision

    def _applying(self, resource_type: ResourceType, name: str) -> list[tuple[Entry, ...]]:
        """The entry groups of every ACL pattern that applies to this literal resource name."""
        groups = []
        found = self._literal.get((resource_type, name))
        if found:
            groups.append(found)
        if name != WILDCARD_RESOURCE:
            found = self._literal.get((resource_type, WILDCARD_RESOURCE))
            if found:
                groups.append(found)
        for length in self._prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            found = self._prefixed.get((resource_type, name[:length]))
            if found:
                groups.append(found)
        return groups

    def _decide(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                name: str) -> bool:
        groups = self._applying(resource_type, name)
        if not groups:  # no ACL on this resource at all
            return self.allow_everyone_if_no_acl_found
        allowed = False
        for group in groups:
            for acl_principal, acl_host, acl_operation, permission in group:
                if acl_principal != principal and acl_principal != WILDCARD_PRINCIPAL:
                    continue
                if acl_host != WILDCARD_HOST and acl_host != host:
                    continue
                if acl_operation is not ALL and acl_operation is not operation:
                    if permission is DENY:
                        continue  # a DENY denies only its own operation (or ALL)
                    if operation is DESCRIBE:
                        if acl_operation not in IMPLIES_DESCRIBE:
                            continue
                    elif operation is DESCRIBE_CONFIGS:
                        if acl_operation not in IMPLIES_DESCRIBE_CONFIGS:
                            continue
                    else:
                        continue
                if permission is DENY:
                    return False
                allowed = True
        return allowed  # ACLs apply to this resource: without a matching ALLOW it is denied

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether some resource of this type allows `operation` (Kafka's `authorizeByResourceType`): an
        ALLOW on the wildcard, or a LITERAL / PREFIXED ALLOW not covered by a DENY of the same name or a
        DENY prefix of it; a LITERAL `*` DENY denies all. Super users (and a default-allow broker with no
        ACL on the probe name) are allowed."""
        if self.authorize(principal, host, operation, resource_type, _HARDCODED_NAME):
            return True
        key = (principal, host, operation, resource_type, None)
        decision = self._cache.get(key)
        if decision is None:
            decision = self._decide_by_type(principal, host, operation, resource_type)
            if len(self._cache) >= self.CACHE_MAX_ENTRIES:
                self._cache.clear()
            self._cache[key] = decision
        return decision

    def _decide_by_type(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType) -> bool:
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow: list[tuple[PatternType, str]] = []
        wildcard_allow = False
        for b in self._by_type.get(resource_type, ()):
            if b.host != host and b.host != WILDCARD_HOST:
                continue
            if b.principal != principal and b.principal != WILDCARD_PRINCIPAL:
                continue
            if b.operation is not operation and b.operation is not ALL:
                continue
            wildcard = b.pattern_type is PatternType.LITERAL and b.name == WILDCARD_RESOURCE
            if b.permission is DENY:
                if wildcard:
                    return False
                (deny_literal if b.pattern_type is PatternType.LITERAL else deny_prefixed).add(b.name)
            elif wildcard:
                wildcard_allow = True
            else:
                allow.append((b.pattern_type, b.name))
        if wildcard_allow:
            return True
        for pattern_type, name in allow:
            if pattern_type is PatternType.LITERAL and name in deny_literal:
                continue
            if any(name[:n] in deny_prefixed for n in range(1, len(name) + 1)):
                continue
            return True
        return False

    # -- the ACL APIs -----------------------------------------------------------------------------------

    def acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """Every ACL the filter selects, sorted (DescribeAcls)."""
        return sorted(b for b in self._acls if acl_filter.matches(b))

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[str | None]:
        """Add the valid bindings (durably, then in memory); per binding None or Kafka's INVALID_REQUEST
        message. Creating an existing binding succeeds and changes nothing."""
        async with self._lock:
            problems = [creation_problem(b) for b in bindings]
            added = {b for b, p in zip(bindings, problems) if p is None}
            if not added <= self._acls:
                await self._commit(self._acls | added)
            return problems

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[tuple[str | None, list[AclBinding]]]:
        """Remove every ACL a valid filter selects; per filter (problem or None, the ACLs it removed).
        Filters are matched against the ACLs as they were before the request, as Kafka does."""
        async with self._lock:
            results: list[tuple[str | None, list[AclBinding]]] = []
            removed: set[AclBinding] = set()
            for acl_filter in filters:
                problem = filter_problem(acl_filter)
                matched = [] if problem is not None else self.acls(acl_filter)
                removed.update(matched)
                results.append((problem, matched))
            if removed:
                await self._commit(self._acls - removed)
            return results

    async def _commit(self, acls: frozenset[AclBinding]) -> None:
        if self._store is not None:  # durable first (off the event loop): a crash keeps the old or new set
            await asyncio.to_thread(self._store.save, acls)
        self._install(acls)


def authorizer_for(config: ServeConfig, data_dir: Path | str) -> Authorizer:
    """The broker's authorizer: `AllowEveryone` without `authorizer.class.name`, else the ACL authorizer
    of `data_dir` (`AclFileError` when its ACL file is bad)."""
    name = config["authorizer.class.name"]
    if not name:
        return AllowEveryone()
    assert name in AUTHORIZER_CLASS_NAMES, name  # ServeConfig refuses any other name
    return StandardAuthorizer.open(data_dir, config)
