"""DescribeUserScramCredentials (key 50, v0) and AlterUserScramCredentials (key 51, v0).

Kafka's rules (its controller's), with its codes and messages:

- Describe needs DESCRIBE on the CLUSTER, Alter needs ALTER on the CLUSTER; without it the whole
  request fails with CLUSTER_AUTHORIZATION_FAILED (Describe: the top-level code; Alter: every user).
- Describe: null or empty `users` lists every user with a credential (by name); each result gives the
  mechanisms and iteration counts, never a salt or key. A user without credential is RESOURCE_NOT_FOUND,
  a user named twice DUPLICATE_RESOURCE.
- Alter: one result per user. A user named twice in one request (even for two mechanisms, or in a
  deletion and an upsertion) is DUPLICATE_RESOURCE, unless its first entry was already refused (that
  refusal is the answer, later entries are ignored: Kafka's order); an empty name UNACCEPTABLE_CREDENTIAL; an unknown
  mechanism UNSUPPORTED_SASL_MECHANISM; iterations outside 4096..16384 UNACCEPTABLE_CREDENTIAL; deleting
  a credential that does not exist RESOURCE_NOT_FOUND. An upsertion carries the salted password (the
  client derived it: the password never travels); the broker keeps the stored and server keys.
  Every valid change is written durably before the answer.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from ..api import ApiHandler, RequestContext
from ..authorization import CLUSTER_NAME, AclOperation, ResourceType
from ..security.scram_credentials import (
    MAX_ITERATIONS,
    MECHANISM_IDS,
    MECHANISM_NAMES,
    MIN_ITERATIONS,
    MIN_SALT_BYTES,
    credential_from_salted_password,
)

DUPLICATE_ALTER = "A user credential cannot be altered twice in the same request"
DUPLICATE_DESCRIBE = "Cannot describe SCRAM credentials for the same user twice in a single request: "
DESCRIBE_MISSING = "Attempt to describe a user credential that does not exist: "
DELETE_MISSING = "Attempt to delete a user credential that does not exist"
CLUSTER_DENIED = "Cluster authorization failed."

_lock = asyncio.Lock()  # one credential change at a time (each rewrites the store's file)


def _store(ctx: RequestContext) -> Any:
    return ctx.broker.security.store


async def describe(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return describe_error(ctx, request, ErrorCode.cluster_authorization_failed)
    store = _store(ctx)
    names = [u.name for u in request.users] if request.users else store.users()
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    results, seen = [], set()
    for name in names:
        if name in seen:
            continue
        seen.add(name)
        credentials = store.mechanisms(name)
        if counts[name] > 1:
            results.append(_described(name, ErrorCode.duplicate_resource, DUPLICATE_DESCRIBE + name))
        elif not credentials:
            results.append(_described(name, ErrorCode.resource_not_found, DESCRIBE_MISSING + name))
        else:
            infos = [{"mechanism": MECHANISM_IDS[m], "iterations": c.iterations}
                     for m, c in sorted(credentials.items())]
            results.append(_described(name, ErrorCode.none, None, infos))
    return ctx.response({"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "results": results})


def _described(name: str, code: int, message: str | None, infos: list[dict[str, int]] | None = None) -> dict[str, Any]:
    return {"user": name, "error_code": code, "error_message": message, "credential_infos": infos or []}


def describe_error(ctx: RequestContext, request: Any, code: int) -> Any:
    """Kafka's error response: the top-level error, and one result (without a user name) per listed user."""
    message = CLUSTER_DENIED if code == ErrorCode.cluster_authorization_failed else None
    return ctx.response({"throttle_time": 0, "error_code": code, "error_message": message, "results": [
        _described("", code, message) for _ in request.users or ()]})


def _upsertion_error(store: Any, upsertion: Any) -> tuple[int, str] | None:
    if not upsertion.name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if int(upsertion.mechanism) not in MECHANISM_NAMES:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    if int(upsertion.iterations) < MIN_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too few iterations"
    if int(upsertion.iterations) > MAX_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too many iterations"
    if len(upsertion.salt) < MIN_SALT_BYTES:
        return ErrorCode.unacceptable_credential, f"The salt must be at least {MIN_SALT_BYTES} bytes"
    if not upsertion.salted_password:
        return ErrorCode.unacceptable_credential, "The salted password must not be empty"
    return None


def _deletion_error(store: Any, deletion: Any) -> tuple[int, str] | None:
    if not deletion.name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    mechanism = MECHANISM_NAMES.get(int(deletion.mechanism))
    if mechanism is None:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    if store.get(deletion.name, mechanism) is None:
        return ErrorCode.resource_not_found, DELETE_MISSING
    return None


async def alter(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorized(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return alter_error(ctx, request, ErrorCode.cluster_authorization_failed)
    store = _store(ctx)
    entries = [(d.name, d, False) for d in request.deletions] + [(u.name, u, True) for u in request.upsertions]
    # Kafka's order: a user's first entry is validated; a later entry of a user whose first one was valid
    # turns it into DUPLICATE_RESOURCE; a later entry of a user already refused is ignored.
    outcome: dict[str, tuple[int, str | None]] = {}
    valid: dict[str, tuple[Any, bool]] = {}
    for name, entry, is_upsert in entries:
        if name in outcome and name not in valid:
            continue
        if name in valid:
            del valid[name]
            outcome[name] = (ErrorCode.duplicate_resource, DUPLICATE_ALTER)
            continue
        error = _upsertion_error(store, entry) if is_upsert else _deletion_error(store, entry)
        outcome[name] = (ErrorCode.none, None) if error is None else error
        if error is None:
            valid[name] = (entry, is_upsert)
    upserts, deletions = [], []
    for name, (entry, is_upsert) in valid.items():
        mechanism = MECHANISM_NAMES[int(entry.mechanism)]
        if is_upsert:
            credential = credential_from_salted_password(mechanism, bytes(entry.salt), bytes(entry.salted_password),
                                                         int(entry.iterations))
            upserts.append((name, mechanism, credential))
        else:
            deletions.append((name, mechanism))
    if upserts or deletions:
        async with _lock:
            await asyncio.to_thread(store.apply, upserts, deletions)
    results = [{"user": name, "error_code": code, "error_message": message}
               for name, (code, message) in outcome.items()]
    return ctx.response({"throttle_time": 0, "results": results})


def alter_error(ctx: RequestContext, request: Any, code: int) -> Any:
    message = CLUSTER_DENIED if code == ErrorCode.cluster_authorization_failed else None
    names = sorted({d.name for d in request.deletions} | {u.name for u in request.upsertions})  # as Kafka
    return ctx.response({"throttle_time": 0, "results": [
        {"user": name, "error_code": code, "error_message": message} for name in names]})


HANDLERS = (
    ApiHandler(50, "DescribeUserScramCredentials", 0, 0, describe, describe_error),
    ApiHandler(51, "AlterUserScramCredentials", 0, 0, alter, alter_error),
)
