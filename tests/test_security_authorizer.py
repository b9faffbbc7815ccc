"""The ACL authorizer's decisions, rule by rule (Kafka's StandardAuthorizer semantics), its filters, its
validation of new ACLs, its durable file and the broker configs that enable it."""

from __future__ import annotations

import asyncio
import json

import pytest

from sharegroup.server.authorization import AclOperation as Op
from sharegroup.server.authorization import AllowEveryone, ResourceType as RT
from sharegroup.server.broker_config import ServeConfig
from sharegroup.server.security.acl_store import AclFileError, AclStore
from sharegroup.server.security.acls import (
    AclBinding,
    AclBindingFilter,
    AclPermissionType as Perm,
    PatternType as PT,
    creation_problem,
)
from sharegroup.server.security.authorizer import StandardAuthorizer, authorizer_for

ALICE, BOB, HOST, OTHER_HOST = "User:alice", "User:bob", "127.0.0.1", "10.0.0.7"
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def acl(name="t", op=Op.READ, perm=Perm.ALLOW, principal=ALICE, host="*", pattern=PT.LITERAL, rt=RT.TOPIC):
    return AclBinding(rt, name, pattern, principal, host, op, perm)


def may(auth, op=Op.READ, name="t", principal=ALICE, host=HOST, rt=RT.TOPIC) -> bool:
    return auth.authorize(principal, host, op, rt, name)


# -- the decision -----------------------------------------------------------------------------------------


def test_no_acl_at_all_is_denied_unless_allow_everyone_if_no_acl_found():
    assert may(StandardAuthorizer()) is False
    assert may(StandardAuthorizer(allow_everyone_if_no_acl_found=True)) is True


def test_any_acl_on_the_resource_takes_away_the_default_allow():
    """hasResourceAcls: an ACL for someone else, or another operation, on the resource -> denied."""
    auth = StandardAuthorizer([acl(principal=BOB)], allow_everyone_if_no_acl_found=True)
    assert may(auth) is False
    assert may(auth, name="other") is True  # no ACL applies to "other"
    prefixed = StandardAuthorizer([acl("t", Op.WRITE, pattern=PT.PREFIXED)], allow_everyone_if_no_acl_found=True)
    assert may(prefixed, Op.READ, "topic") is False


def test_principal_matches_exactly_or_by_the_wildcard_user():
    auth = StandardAuthorizer([acl(principal=ALICE)])
    assert (may(auth, principal=ALICE), may(auth, principal=BOB)) == (True, False)
    everyone = StandardAuthorizer([acl(principal="User:*")])
    assert (may(everyone, principal=ALICE), may(everyone, principal=BOB)) == (True, True)


def test_host_is_the_wildcard_or_the_exact_client_address():
    auth = StandardAuthorizer([acl(host=HOST)])
    assert (may(auth, host=HOST), may(auth, host=OTHER_HOST)) == (True, False)
    assert may(StandardAuthorizer([acl(host="*")]), host=OTHER_HOST) is True


def test_literal_wildcard_and_prefixed_patterns():
    literal = StandardAuthorizer([acl("orders")])
    assert (may(literal, name="orders"), may(literal, name="orders-eu"), may(literal, name="order")) == (True, False, False)
    wildcard = StandardAuthorizer([acl("*")])
    assert (may(wildcard, name="orders"), may(wildcard, name="x")) == (True, True)
    prefixed = StandardAuthorizer([acl("ord", pattern=PT.PREFIXED)])
    assert [may(prefixed, name=n) for n in ("ord", "orders", "or", "xord")] == [True, True, False, False]
    # a PREFIXED "*" is the literal prefix "*", not a wildcard
    assert may(StandardAuthorizer([acl("*", pattern=PT.PREFIXED)]), name="orders") is False


def test_acls_apply_only_to_their_resource_type():
    auth = StandardAuthorizer([acl("g", rt=RT.GROUP)])
    assert (may(auth, name="g", rt=RT.GROUP), may(auth, name="g", rt=RT.TOPIC)) == (True, False)


def test_deny_wins_over_allow_whatever_the_patterns():
    cases = [
        [acl("orders"), acl("orders", perm=Perm.DENY)],
        [acl("orders"), acl("ord", perm=Perm.DENY, pattern=PT.PREFIXED)],
        [acl("orders"), acl("*", perm=Perm.DENY)],
        [acl("orders"), acl("orders", perm=Perm.DENY, principal="User:*")],
        [acl("*", op=Op.ALL), acl("orders", perm=Perm.DENY)],
    ]
    for acls in cases:
        assert may(StandardAuthorizer(acls), name="orders") is False, acls
    # a DENY from another host does not match this request
    assert may(StandardAuthorizer([acl("orders"), acl("orders", perm=Perm.DENY, host=OTHER_HOST)]), name="orders")


def test_all_matches_every_operation_to_allow_and_to_deny():
    allow_all = StandardAuthorizer([acl(op=Op.ALL)])
    assert all(may(allow_all, op) for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER_CONFIGS, Op.DESCRIBE))
    deny_all = StandardAuthorizer([acl(op=Op.READ), acl(op=Op.ALL, perm=Perm.DENY)])
    assert may(deny_all, Op.READ) is False


def test_implied_operations_for_allow_only():
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE):
        assert may(StandardAuthorizer([acl(op=op)]), Op.DESCRIBE) is True, op
    for op in (Op.CREATE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, Op.CLUSTER_ACTION):
        assert may(StandardAuthorizer([acl(op=op)]), Op.DESCRIBE) is False, op
    assert may(StandardAuthorizer([acl(op=Op.ALTER_CONFIGS)]), Op.DESCRIBE_CONFIGS) is True
    assert may(StandardAuthorizer([acl(op=Op.ALTER)]), Op.DESCRIBE_CONFIGS) is False
    assert may(StandardAuthorizer([acl(op=Op.READ)]), Op.WRITE) is False  # nothing else is implied
    # a DENY denies only its own operation: DENY READ leaves DESCRIBE (implied by WRITE) allowed
    auth = StandardAuthorizer([acl(op=Op.WRITE), acl(op=Op.READ, perm=Perm.DENY)])
    assert (may(auth, Op.READ), may(auth, Op.DESCRIBE), may(auth, Op.WRITE)) == (False, True, True)
    # ... and DENY DESCRIBE does not deny READ
    auth = StandardAuthorizer([acl(op=Op.READ), acl(op=Op.DESCRIBE, perm=Perm.DENY)])
    assert (may(auth, Op.READ), may(auth, Op.DESCRIBE)) == (True, False)


def test_super_users_are_allowed_everything_even_against_deny():
    auth = StandardAuthorizer([acl(op=Op.ALL, perm=Perm.DENY, principal="User:*")], super_users={"User:admin"})
    assert may(auth, Op.DELETE, principal="User:admin") is True
    assert may(auth, Op.READ, principal=ALICE) is False


def test_super_users_config_is_semicolon_separated_and_never_a_wildcard():
    config = ServeConfig.build({"authorizer.class.name": STANDARD, "super.users": " User:admin ; User:ops;"})
    assert config["super.users"] == "User:admin ; User:ops;"
    auth = StandardAuthorizer(super_users={"User:*"})
    assert may(auth, principal=ALICE) is False  # only the literal principal "User:*" would be super
    with pytest.raises(ValueError, match="super.users: 'admin' is not a principal"):
        ServeConfig.build({"super.users": "User:ops;admin"})


def test_decisions_are_cached_and_the_cache_is_emptied_on_every_change_and_bounded():
    auth = StandardAuthorizer([acl()])
    assert may(auth) is True
    asyncio.run(auth.create_acls([acl(perm=Perm.DENY)]))
    assert may(auth) is False
    asyncio.run(auth.delete_acls([AclBindingFilter(permission=Perm.DENY)]))
    assert may(auth) is True
    auth.CACHE_MAX_ENTRIES = 4
    for i in range(10):
        may(auth, name=f"t{i}")
        auth._check()
    assert len(auth._cache) <= 4


def test_authorize_by_resource_type_follows_kafka():
    """InitProducerId's 'WRITE on any topic': an ALLOW not dominated by a DENY of the same name or a DENY prefix."""
    w = Op.WRITE

    def any_topic(acls, principal=ALICE, **kw) -> bool:
        return StandardAuthorizer(acls, **kw).authorize_by_resource_type(principal, HOST, w, RT.TOPIC)

    assert any_topic([]) is False
    assert any_topic([acl("a", w)]) is True
    assert any_topic([acl("a", w, pattern=PT.PREFIXED)]) is True
    assert any_topic([acl("a", Op.READ)]) is False
    assert any_topic([acl("a", w, principal=BOB)]) is False
    assert any_topic([acl("a", w, host=OTHER_HOST)]) is False
    assert any_topic([acl("a", w), acl("a", w, Perm.DENY)]) is False
    assert any_topic([acl("abc", w), acl("ab", w, Perm.DENY, pattern=PT.PREFIXED)]) is False
    assert any_topic([acl("abc", w), acl("abd", w, Perm.DENY)]) is True
    assert any_topic([acl("*", w)]) is True
    assert any_topic([acl("*", w), acl("*", w, Perm.DENY)]) is False
    assert any_topic([acl("a", Op.ALL)]) is True
    assert any_topic([], principal="User:admin", super_users={"User:admin"}) is True
    assert any_topic([], allow_everyone_if_no_acl_found=True) is True


# -- filters and validation ------------------------------------------------------------------------------


def test_filters_any_match_literal_prefixed():
    bindings = [acl("orders"), acl("*"), acl("ord", pattern=PT.PREFIXED), acl("orders", pattern=PT.PREFIXED),
                acl("x"), acl("orders", rt=RT.GROUP)]
    auth = StandardAuthorizer(bindings)

    def names(**kw):
        return sorted((b.resource_type.name, b.name, b.pattern_type.name) for b in auth.acls(AclBindingFilter(**kw)))

    assert names(resource_type=RT.TOPIC, name="orders", pattern_type=PT.LITERAL) == [("TOPIC", "orders", "LITERAL")]
    assert names(resource_type=RT.TOPIC, name="orders", pattern_type=PT.PREFIXED) == [("TOPIC", "orders", "PREFIXED")]
    assert names(resource_type=RT.TOPIC, name="orders", pattern_type=PT.ANY) == [
        ("TOPIC", "orders", "LITERAL"), ("TOPIC", "orders", "PREFIXED")]
    assert names(resource_type=RT.TOPIC, name="orders", pattern_type=PT.MATCH) == [
        ("TOPIC", "*", "LITERAL"), ("TOPIC", "ord", "PREFIXED"), ("TOPIC", "orders", "LITERAL"),
        ("TOPIC", "orders", "PREFIXED")]
    assert len(names()) == 6 and len(names(resource_type=RT.GROUP)) == 1
    assert auth.acls(AclBindingFilter(principal=BOB)) == []
    assert len(auth.acls(AclBindingFilter(host="*", operation=Op.READ, permission=Perm.ALLOW))) == 6
    assert auth.acls(AclBindingFilter(operation=Op.WRITE)) == []


def test_new_acls_are_validated_with_kafkas_messages():
    assert creation_problem(acl("other", Op.ALTER, rt=RT.CLUSTER)) == (
        "The only valid name for the CLUSTER resource is kafka-cluster")
    assert creation_problem(acl("kafka-cluster", Op.ALTER, rt=RT.CLUSTER)) is None
    assert creation_problem(acl("")) == "Invalid empty resource name"
    assert creation_problem(acl(rt=RT.ANY)) == "Invalid resourceType ANY"
    assert creation_problem(acl(pattern=PT.MATCH)) == "Invalid patternType MATCH"
    assert creation_problem(acl(pattern=PT.ANY)) == "Invalid patternType ANY"
    assert creation_problem(acl(op=Op.ANY)) == "Invalid operation ANY"
    assert creation_problem(acl(perm=Perm.ANY)) == "Invalid permissionType ANY"
    assert creation_problem(acl(principal="alice")) == (
        "Could not parse principal from `alice` (no colon is present separating the principal type from the "
        "principal name)")


def test_create_is_idempotent_and_delete_reports_per_filter_against_the_acls_before_the_request(tmp_path):
    auth = StandardAuthorizer(store=AclStore(tmp_path))
    assert asyncio.run(auth.create_acls([acl(), acl(), acl(principal="bad")])) == [
        None, None, "Could not parse principal from `bad` (no colon is present separating the principal type "
                    "from the principal name)"]
    assert len(auth) == 1
    asyncio.run(auth.create_acls([acl(), acl("u")]))
    assert len(auth) == 2
    results = asyncio.run(auth.delete_acls([AclBindingFilter(name="t"), AclBindingFilter(resource_type=RT.TOPIC),
                                            AclBindingFilter(pattern_type=PT.UNKNOWN)]))
    assert results == [(None, [acl()]), (None, [acl(), acl("u")]), ("Unknown patternFilter.", [])]
    assert len(auth) == 0
    assert asyncio.run(auth.delete_acls([AclBindingFilter(operation=Op.UNKNOWN)])) == [("Unknown entryFilter.", [])]


# -- durability and configuration ----------------------------------------------------------------------


def test_acls_are_durable_in_the_data_directory(tmp_path):
    config = ServeConfig.build({"authorizer.class.name": STANDARD})
    auth = authorizer_for(config, tmp_path)
    asyncio.run(auth.create_acls([acl("orders", pattern=PT.PREFIXED), acl("g", rt=RT.GROUP, perm=Perm.DENY)]))
    doc = json.loads((tmp_path / "security" / "acls.json").read_text())
    assert doc["version"] == 1 and {"resource_type": "GROUP", "name": "g", "pattern_type": "LITERAL",
                                    "principal": ALICE, "host": "*", "operation": "READ",
                                    "permission": "DENY"} in doc["acls"]
    again = authorizer_for(config, tmp_path)
    assert again.acls(AclBindingFilter()) == auth.acls(AclBindingFilter()) and len(again) == 2
    assert may(again, name="orders-1") is True and may(again, name="g", rt=RT.GROUP) is False
    assert not (tmp_path / "security" / "acls.json.tmp").exists()


@pytest.mark.parametrize("content", [b"{not json", b'{"version": 2, "acls": []}', b'{"version": 1, "acls": [1]}',
                                     b'{"version": 1, "acls": [{"resource_type": "TOPIC"}]}',
                                     b'{"version": 1, "acls": [{"resource_type": "TOPIC", "name": "t", '
                                     b'"pattern_type": "MATCH", "principal": "User:a", "host": "*", '
                                     b'"operation": "READ", "permission": "ALLOW"}]}'])
def test_a_corrupt_acl_file_is_a_clear_startup_error(tmp_path, content):
    (tmp_path / "security").mkdir()
    (tmp_path / "security" / "acls.json").write_bytes(content)
    with pytest.raises(AclFileError, match="acls.json"):
        authorizer_for(ServeConfig.build({"authorizer.class.name": STANDARD}), tmp_path)


def test_authorizer_class_names(tmp_path):
    assert isinstance(authorizer_for(ServeConfig.build({}), tmp_path), AllowEveryone)
    old = ServeConfig.build({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
    assert isinstance(authorizer_for(old, tmp_path), StandardAuthorizer)
    with pytest.raises(ValueError, match="authorizer.class.name 'com.example.Mine' is not supported"):
        ServeConfig.build({"authorizer.class.name": "com.example.Mine"})
    defaults = ServeConfig.build({})
    assert (defaults["super.users"], defaults["allow.everyone.if.no.acl.found"]) == ("", False)
    assert ServeConfig.build({"allow.everyone.if.no.acl.found": "true"})["allow.everyone.if.no.acl.found"] is True
