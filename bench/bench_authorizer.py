"""ACL authorizer benchmarks: what one per-request check costs, against a scan of every ACL, in one run.

    .venv/bin/python -m pytest bench/bench_authorizer.py --benchmark-enable -q

The ACL set (seeded): N ACLs over N/4 users, half LITERAL topic names, a quarter PREFIXED, a quarter on
groups, a few DENYs. Three ways to decide READ on one topic for one user:
- `cached`: `StandardAuthorizer.authorize` with the decision already cached (the steady state of a
  consumer fetching the same topics: one dictionary look-up);
- `indexed`: the uncached decision (`_decide`): look-ups by LITERAL name, `*`, and one per distinct
  prefix length, never a scan;
- `scan`: a reference that tests every ACL (what an unindexed authorizer does per check).
Swept over N; the ratios scan/indexed and indexed/cached are printed and kept in extra_info. With
--benchmark-disable (the test run) each case runs once on a small set and the three answers are
compared on many names, so this file doubles as a check of the index against the scan.
"""

from __future__ import annotations

import random
import time

import pytest

from sharegroup.server.authorization import AclOperation as Op
from sharegroup.server.authorization import ResourceType as RT
from sharegroup.server.security.acls import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclBinding,
    AclPermissionType as Perm,
    PatternType as PT,
)
from sharegroup.server.security.authorizer import IMPLIES_DESCRIBE, IMPLIES_DESCRIBE_CONFIGS, StandardAuthorizer

HOST = "127.0.0.1"


def acl_set(n: int, seed: int = 7) -> list[AclBinding]:
    rng = random.Random(seed)
    users = [f"User:u{i}" for i in range(max(1, n // 4))]
    out = []
    for i in range(n):
        kind = i % 4
        user = rng.choice(users)
        op = rng.choice((Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALL))
        perm = Perm.DENY if i % 97 == 0 else Perm.ALLOW
        if kind in (0, 1):
            out.append(AclBinding(RT.TOPIC, f"topic-{i}", PT.LITERAL, user, WILDCARD_HOST, op, perm))
        elif kind == 2:
            out.append(AclBinding(RT.TOPIC, f"team{i % 50}-", PT.PREFIXED, user, WILDCARD_HOST, op, perm))
        else:
            out.append(AclBinding(RT.GROUP, f"group-{i}", PT.LITERAL, user, WILDCARD_HOST, Op.READ, perm))
    return out


def scan_decide(acls: list[AclBinding], principal: str, host: str, op: Op, rt: RT, name: str,
                default: bool = False) -> bool:
    """The same rules as StandardAuthorizer, testing every ACL (the reference and the baseline)."""
    applies = allowed = False
    for b in acls:
        if b.resource_type is not rt:
            continue
        if b.pattern_type is PT.LITERAL and b.name not in (name, WILDCARD_RESOURCE):
            continue
        if b.pattern_type is PT.PREFIXED and not name.startswith(b.name):
            continue
        applies = True
        if b.principal not in (principal, WILDCARD_PRINCIPAL) or b.host not in (host, WILDCARD_HOST):
            continue
        if b.operation is not Op.ALL and b.operation is not op:
            if b.permission is Perm.DENY:
                continue
            implied = (op is Op.DESCRIBE and b.operation in IMPLIES_DESCRIBE) or (
                op is Op.DESCRIBE_CONFIGS and b.operation in IMPLIES_DESCRIBE_CONFIGS)
            if not implied:
                continue
        if b.permission is Perm.DENY:
            return False
        allowed = True
    return allowed if applies else default


def queries(acls: list[AclBinding], count: int, seed: int = 11) -> list[tuple[str, Op, str]]:
    rng = random.Random(seed)
    topics = [b.name for b in acls if b.resource_type is RT.TOPIC and b.pattern_type is PT.LITERAL] or ["t"]
    users = sorted({b.principal for b in acls}) or ["User:x"]
    names = topics + [f"team{i}-orders" for i in range(50)] + ["unknown-topic"]
    return [(rng.choice(users), rng.choice((Op.READ, Op.WRITE, Op.DESCRIBE)), rng.choice(names)) for _ in range(count)]


def report(benchmark, capsys, title: str, numbers: dict) -> None:
    benchmark.extra_info.update(numbers)
    with capsys.disabled():
        print(f"\n{title}")
        for key, value in numbers.items():
            print(f"  {key:36s} {value}")


def per_call_ns(fn, calls) -> float:
    t0 = time.perf_counter()
    for args in calls:
        fn(*args)
    return (time.perf_counter() - t0) / len(calls) * 1e9


@pytest.mark.parametrize("acl_count", [100, 10_000])
def test_authorize_cost(benchmark, capsys, acl_count):
    n = 40 if benchmark.disabled else acl_count
    acls = acl_set(n)
    auth = StandardAuthorizer(acls)
    asked = queries(acls, 200 if benchmark.disabled else 2_000)
    # the index and the scan agree on every question (and so does the cache)
    for principal, op, name in asked:
        expected = scan_decide(acls, principal, HOST, op, RT.TOPIC, name)
        assert auth._decide(principal, HOST, op, RT.TOPIC, name) is expected, (principal, op, name)
        assert auth.authorize(principal, HOST, op, RT.TOPIC, name) is expected
    principal, op, name = asked[0]
    benchmark(auth.authorize, principal, HOST, op, RT.TOPIC, name)
    if benchmark.disabled:
        return
    sample = asked[:200]
    indexed_ns = per_call_ns(lambda p, o, t: auth._decide(p, HOST, o, RT.TOPIC, t), sample)
    scan_ns = per_call_ns(lambda p, o, t: scan_decide(acls, p, HOST, o, RT.TOPIC, t), sample)
    cached_ns = benchmark.stats.stats.median * 1e9
    report(benchmark, capsys, f"authorize READ/WRITE/DESCRIBE on a topic, {n} ACLs", {
        "cached_ns_median": round(cached_ns),
        "indexed_uncached_ns_mean": round(indexed_ns),
        "scan_every_acl_ns_mean": round(scan_ns),
        "scan_over_indexed": round(scan_ns / indexed_ns, 1),
        "indexed_over_cached": round(indexed_ns / cached_ns, 1),
    })
