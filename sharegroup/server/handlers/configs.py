"""DescribeConfigs (key 32) v1-4, AlterConfigs (key 33) v0-2 and IncrementalAlterConfigs (key 44) v0-1 for
topics, brokers, groups.

Resource types are Kafka's: TOPIC 2, BROKER 4, GROUP 32.
- A topic describes every topic config of Kafka 4.x (`topic_config_defs`), read-write, with its Kafka
  type: its override (source TOPIC_CONFIG), else the broker key it inherits from when given to the
  broker (STATIC_BROKER_CONFIG), else the default (DEFAULT_CONFIG). With IncludeSynonyms the synonyms
  follow Kafka's order (override, given broker keys, broker-key defaults); with IncludeDocumentation
  each carries a short text. SET and DELETE change the overrides, checked as CreateTopics checks them
  (INVALID_CONFIG), durable in the topic store and applied to the partition logs at once. Describing
  checks the name first (INVALID_TOPIC_EXCEPTION), then existence (UNKNOWN_TOPIC_OR_PARTITION, no
  message); an empty list of keys describes every config, as null does.
- The broker (resource name = its node id) describes every broker key it uses, read-only, with its
  Kafka type: STATIC_BROKER_CONFIG when given in server.properties / --override (even at the default's
  value), else DEFAULT_CONFIG. With IncludeSynonyms each lists Kafka's synonyms: the keys of its family
  (`log.retention.ms`, `.minutes`, `.hours`; any other key alone) given at start-up, then those with a
  default, from its own name on; with IncludeDocumentation a short text. PASSWORD-type keys (TLS passwords
  and keys, `sasl.jaas.config`) are sensitive and shown without their value, in their synonyms too, as
  Kafka shows them. The name "" is Kafka's cluster-wide dynamic defaults: it describes the dynamic
  defaults set (source DYNAMIC_DEFAULT_BROKER_CONFIG). Only KIP-1191's two dead-letter queue keys are
  dynamic (`dynamic_broker_configs`, with share groups on): SET and DELETE change them for this node or as
  the cluster default, durably, and they are described read-write with the dynamic synonyms first. Any
  other key answers INVALID_REQUEST "Cannot update these configs dynamically" (Kafka's code for a static
  broker config). Another node id is INVALID_REQUEST.
- A group (any name: configs may be set before the group exists, as in Kafka) describes its group
  configs: values set on it (source GROUP_CONFIG) over the broker defaults, each with the source of its
  first synonym. The synonyms are Kafka 4.3's: the group's value, then a `--group-config` default
  (STATIC_BROKER_CONFIG, serve's own), then those of the broker key `group.` + key (given at start-up,
  then its default) or, for a key no broker key sets, its own Kafka default (DEFAULT_CONFIG); each with a
  short documentation text. SET and DELETE are checked against the broker's bounds (INVALID_CONFIG) and
  kept by `GroupConfigStore`.
APPEND and SUBTRACT (list configs) apply to none of these keys: INVALID_CONFIG. A resource type Kafka
does not know is UNSUPPORTED_VERSION for an alter (INVALID_REQUEST for a describe). A type not served
here (BROKER_LOGGER, CLIENT_METRICS), the same resource twice in one request, a key twice in one
resource, or a null value for any operation but DELETE is INVALID_REQUEST (the last two before
authorization, as Kafka's broker checks them before forwarding to its controller). A topic's new
configs are checked before its existence (Kafka's order). `validate_only` checks only.

AlterConfigs (deprecated in Kafka but still served, and the only alter some admin clients have) is
Kafka's non-incremental REPLACE: the given configs become the resource's whole set of dynamic configs,
keys not given revert to their defaults; it is checked as IncrementalAlterConfigs checks a SET of each
given key (a null value is INVALID_REQUEST). A broker resource has no dynamic configs here, so an empty
set succeeds (for "" or this node) and any key is the same INVALID_REQUEST as above.

Authorization per resource, before anything else of it: DescribeConfigs needs DESCRIBE_CONFIGS and
IncrementalAlterConfigs ALTER_CONFIGS on the CLUSTER (for a BROKER resource), on the topic (TOPIC) or on
the group (GROUP); a refusal is that resource's CLUSTER_ / TOPIC_ / GROUP_AUTHORIZATION_FAILED with the
error's default message and no configs.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Iterable

from kio.schema.errors import ErrorCode

from ...errors import Errors, ShareError
from ..api import ApiHandler, RequestContext
from ..authorization import CLUSTER_NAME, AclOperation, ResourceType
from ..broker_config import CONFIG_DEFS
from ..dynamic_broker_configs import CLUSTER_DEFAULT, DYNAMIC_BROKER_KEYS, NODE, DynamicBrokerConfigs
from ..group_configs import DELETE, GROUP_CONFIG_DEFAULTS, GROUP_CONFIG_DOCS, SET, GroupConfigStore
from ...topics.topic_config_defs import TOPIC_CONFIG_DEFS, TopicConfigDef
from ...topics.topic_store import check_topic_name

TOPIC, BROKER, GROUP = 2, 4, 32
BROKER_LOGGER, CLIENT_METRICS = 8, 16  # not served here, but authorized as Kafka does (on the cluster)
# Kafka's ConfigSource values
TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG, GROUP_CONFIG = 1, 4, 5, 8
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 2, 3
# Kafka's ConfigType values
UNKNOWN, BOOLEAN, STRING, INT, LONG, PASSWORD = 0, 1, 2, 3, 5, 9
_CONFIG_TYPES = {"boolean": BOOLEAN, "string": STRING, "int": INT, "long": LONG}
# Broker keys of Kafka's PASSWORD type: described as sensitive, never with their value (as Kafka does)
_PASSWORD_KEYS = frozenset({
    "ssl.keystore.password", "ssl.key.password", "ssl.truststore.password", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.truststore.certificates", "sasl.jaas.config",
})

# Topic keys the store acts on -> (LogConfig field, config type)
_TOPIC_FIELDS = {"segment.bytes": ("segment_bytes", INT), "retention.ms": ("retention_ms", LONG),
                 "retention.bytes": ("retention_bytes", LONG), "max.message.bytes": ("max_message_bytes", INT),
                 "message.timestamp.before.max.ms": ("message_timestamp_before_max_ms", LONG),
                 "message.timestamp.after.max.ms": ("message_timestamp_after_max_ms", LONG)}


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _type_of(value: Any) -> int:
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, int):
        return LONG
    return STRING


def _entry(name: str, value: Any, source: int, config_type: int, read_only: bool = False) -> dict[str, Any]:
    return {"name": name, "value": _text(value), "read_only": read_only, "config_source": source,
            "is_sensitive": False, "synonyms": [], "config_type": config_type, "documentation": None}


def _synonym(name: str, value: str | None, source: int) -> dict[str, Any]:
    return {"name": name, "value": value, "source": source}


def _synonym_chain(config: Any, key: str, names: tuple[str, ...], defaults: tuple[str | None, ...],
                   sensitive: bool = False) -> list[dict[str, Any]]:
    """Kafka's broker synonyms of `key` (ConfigHelper.configSynonyms): each of `names` (a broker key family in
    precedence order) given to this broker (STATIC_BROKER_CONFIG), then each with a Kafka default (`defaults`,
    None: none; DEFAULT_CONFIG); the leading entries not named `key` are dropped, as Kafka drops them. A
    sensitive key's synonyms carry no value. Nothing is dynamic here, so no DYNAMIC_* synonyms exist."""
    static = [_synonym(k, None if sensitive else _text(config.values[k]), STATIC_BROKER_CONFIG)
              for k in names if k in config.static_keys]
    found = static + [_synonym(k, None if sensitive else v, DEFAULT_CONFIG) for k, v in zip(names, defaults)
                      if v is not None]
    first = next((i for i, s in enumerate(found) if s["name"] == key), len(found))
    return found[first:]


def _broker_synonyms(ctx: RequestContext, d: TopicConfigDef) -> list[dict[str, Any]]:
    """Kafka's broker synonyms of a topic config: named by its first broker key (so `retention.ms` with only
    `log.retention.hours` set has none). Broker keys serve ignores are never given here."""
    return _synonym_chain(ctx.broker.config, d.broker_keys[0], d.broker_keys, d.broker_defaults)


def _override_text(d: TopicConfigDef | None, raw: str) -> str:
    """A stored override as Kafka shows it (its parsed value); unparseable stored text is shown as is."""
    if d is None:
        return raw
    try:
        return d.parse(raw)
    except ShareError:
        return raw


def topic_config_entries(ctx: RequestContext, overrides: dict[str, str], effective: Any) -> list[dict[str, Any]]:
    """Every topic config Kafka 4.x describes, with its value, source, type, synonyms and documentation:
    the keys the store acts on show the effective `LogConfig` value, the others their override or Kafka's
    default. A stored override Kafka 4.x no longer knows is listed too, of UNKNOWN type (Kafka lists it so)."""
    out = []
    for key in sorted(set(TOPIC_CONFIG_DEFS) | set(overrides)):
        d = TOPIC_CONFIG_DEFS.get(key)
        if key in _TOPIC_FIELDS:
            value = _text(getattr(effective, _TOPIC_FIELDS[key][0]))
        elif key in overrides:
            value = _override_text(d, overrides[key])
        else:
            value = TOPIC_CONFIG_DEFS[key].default
        synonyms = [_synonym(key, value, TOPIC_CONFIG)] if key in overrides else []
        if d is not None and d.broker_keys:
            synonyms += _broker_synonyms(ctx, d)
        out.append({**_entry(key, value, synonyms[0]["source"] if synonyms else DEFAULT_CONFIG,
                             d.config_type if d is not None else UNKNOWN),
                    "synonyms": synonyms, "documentation": d.doc if d is not None else None})
    return out


def _topic_configs(ctx: RequestContext, name: str) -> list[dict[str, Any]]:
    store = ctx.broker.store
    check_topic_name(name)  # Kafka validates the name first: INVALID_TOPIC_EXCEPTION
    overrides = store.topic_configs(name)
    if overrides is None:
        raise ShareError(Errors.UNKNOWN_TOPIC_OR_PARTITION, "")  # Kafka gives no message for it
    return topic_config_entries(ctx, overrides, store.topic_log_config(name))


def _check_broker_name(ctx: RequestContext, name: str) -> None:
    """"" or this node's id, read as Kafka reads a broker id (a Java int: "01" and "+1" are 1)."""
    if name == "":
        return
    if not re.fullmatch(r"[+-]?[0-9]+", name) or not -(2**31) <= int(name) < 2**31:
        raise ShareError(Errors.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}")
    if int(name) != ctx.broker.node_id:
        raise ShareError(Errors.INVALID_REQUEST, f"Unexpected broker id, expected {ctx.broker.node_id} or empty string, "
                                                 f"but received {name}")


# Kafka's broker key families (DynamicBrokerConfig.brokerConfigSynonyms) among the keys serve uses: each
# key of a family lists the others as synonyms, in this precedence order.
_RETENTION_KEYS = ("log.retention.ms", "log.retention.minutes", "log.retention.hours")


def _broker_key_synonyms(config: Any, key: str, sensitive: bool = False) -> list[dict[str, Any]]:
    names = _RETENTION_KEYS if key in _RETENTION_KEYS else (key,)
    return _synonym_chain(config, key, names, tuple(_text(CONFIG_DEFS[k].default) for k in names), sensitive)


def _broker_entry(config: Any, key: str, value: Any, dynamic: DynamicBrokerConfigs | None = None) -> dict[str, Any]:
    """A broker config as Kafka describes it: its source is that of its first synonym (a dynamic value of
    this node, then of the cluster default, for the dynamic keys; STATIC_BROKER_CONFIG when given at
    start-up, even with the default's value), else DEFAULT_CONFIG."""
    sensitive = key in _PASSWORD_KEYS
    synonyms = _broker_key_synonyms(config, key, sensitive)
    read_only = True
    if dynamic is not None and key in DYNAMIC_BROKER_KEYS:
        read_only = False
        value = dynamic.value(key)
        synonyms = [_synonym(key, _text(values[key]), source)
                    for values, source in ((dynamic.values(NODE), DYNAMIC_BROKER_CONFIG),
                                           (dynamic.values(CLUSTER_DEFAULT), DYNAMIC_DEFAULT_BROKER_CONFIG))
                    if key in values] + synonyms
    source = synonyms[0]["source"] if synonyms else DEFAULT_CONFIG
    entry = _entry(key, None if sensitive else value, source,
                   PASSWORD if sensitive else _CONFIG_TYPES[CONFIG_DEFS[key].type], read_only=read_only)
    return {**entry, "is_sensitive": sensitive, "synonyms": synonyms, "documentation": CONFIG_DEFS[key].doc or None}


def _dynamic(ctx: RequestContext) -> DynamicBrokerConfigs | None:
    share = ctx.broker.share
    return None if share is None else share.dynamic_broker_configs


def _broker_configs(ctx: RequestContext, name: str) -> list[dict[str, Any]]:
    """This node's configs; the resource "" is Kafka's cluster-wide dynamic defaults (those set)."""
    _check_broker_name(ctx, name)
    dynamic = _dynamic(ctx)
    if name == "":
        if dynamic is None:
            return []
        return [{**_entry(k, v, DYNAMIC_DEFAULT_BROKER_CONFIG, _CONFIG_TYPES[CONFIG_DEFS[k].type]),
                 "synonyms": [_synonym(k, _text(v), DYNAMIC_DEFAULT_BROKER_CONFIG)],
                 "documentation": CONFIG_DEFS[k].doc or None}
                for k, v in sorted(dynamic.values(CLUSTER_DEFAULT).items())]
    config = ctx.broker.config
    return [_broker_entry(config, k, v, dynamic) for k, v in sorted(config.values.items())]


def _group_store(ctx: RequestContext) -> GroupConfigStore:
    share = ctx.broker.share
    if share is None:
        raise ShareError(Errors.COORDINATOR_NOT_AVAILABLE, "share groups are not enabled")
    return share.group_configs


def _group_synonyms(store: Any, key: str, value: Any, own: bool) -> list[dict[str, Any]]:
    """Kafka's synonyms of a group config (Kafka 4.3, KAFKA-20289): the value set on the group
    (GROUP_CONFIG), then the synonyms of the broker key it defaults from (`group.` + key: given at start-up
    STATIC_BROKER_CONFIG, then its DEFAULT_CONFIG), or, for a key without one, the group config's own Kafka
    default (DEFAULT_CONFIG). serve's `--group-config` default, given at start-up, is a STATIC_BROKER_CONFIG
    synonym under the group key's name, before the broker key's."""
    config = store.config
    synonyms = [_synonym(key, _text(value), GROUP_CONFIG)] if own else []
    if key in config.group_defaults:
        synonyms.append(_synonym(key, _text(config.group_defaults[key]), STATIC_BROKER_CONFIG))
    broker_key = "group." + key
    if broker_key in CONFIG_DEFS:
        return synonyms + _broker_key_synonyms(config, broker_key)
    return synonyms + [_synonym(key, _text(GROUP_CONFIG_DEFAULTS[key]), DEFAULT_CONFIG)]


def _group_configs(ctx: RequestContext, name: str) -> list[dict[str, Any]]:
    if not name:
        raise ShareError(Errors.INVALID_REQUEST, "Group name must not be empty")
    store = _group_store(ctx)
    out = []
    for key, (value, own) in sorted(store.effective(name).items()):
        synonyms = _group_synonyms(store, key, value, own)
        entry = _entry(key, value, synonyms[0]["source"], INT if _type_of(value) == LONG else _type_of(value))
        out.append({**entry, "synonyms": synonyms, "documentation": GROUP_CONFIG_DOCS[key]})
    return out  # Kafka's group configs are INT, STRING or BOOLEAN


_DESCRIBERS = {TOPIC: _topic_configs, BROKER: _broker_configs, GROUP: _group_configs}


# config resource type -> (ACL resource type, refusal code, refusal message)
_ACL_RESOURCE = {
    TOPIC: (ResourceType.TOPIC, ErrorCode.topic_authorization_failed, "Topic authorization failed."),
    BROKER: (ResourceType.CLUSTER, ErrorCode.cluster_authorization_failed, "Cluster authorization failed."),
    GROUP: (ResourceType.GROUP, ErrorCode.group_authorization_failed, "Group authorization failed."),
    BROKER_LOGGER: (ResourceType.CLUSTER, ErrorCode.cluster_authorization_failed, "Cluster authorization failed."),
    CLIENT_METRICS: (ResourceType.CLUSTER, ErrorCode.cluster_authorization_failed, "Cluster authorization failed."),
}


def _refusal(ctx: RequestContext, resource: Any, operation: AclOperation) -> tuple[int, str] | None:
    """(code, message) when this principal may not do `operation` on the resource's configs, else None."""
    acl = _ACL_RESOURCE.get(int(resource.resource_type))
    if acl is None:
        return None  # an unsupported type: INVALID_REQUEST below
    resource_type, code, message = acl
    name = CLUSTER_NAME if resource_type is ResourceType.CLUSTER else resource.resource_name
    return None if ctx.authorized(operation, resource_type, name) else (code, message)


def _duplicates(resources: Iterable[Any]) -> set[tuple[int, str]]:
    counts = Counter((int(r.resource_type), r.resource_name) for r in resources)
    return {k for k, n in counts.items() if n > 1}


# -- DescribeConfigs ----------------------------------------------------------------------------------


def _described(resource: Any, code: int, message: str | None, configs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "resource_type": resource.resource_type,
            "resource_name": resource.resource_name, "configs": configs}


async def describe(ctx: RequestContext, request: Any) -> Any:
    results = []
    for resource in request.resources:
        refused = _refusal(ctx, resource, AclOperation.DESCRIBE_CONFIGS)
        if refused is not None:
            results.append(_described(resource, refused[0], refused[1], []))
            continue
        describer = _DESCRIBERS.get(int(resource.resource_type))
        if describer is None:
            results.append(_described(resource, ErrorCode.invalid_request,
                                      f"Unsupported resource type {resource.resource_type}", []))
            continue
        try:
            configs = describer(ctx, resource.resource_name)
        except ShareError as exc:
            results.append(_described(resource, int(exc.error), exc.message or None, []))
            continue
        keys = resource.configuration_keys
        if keys:  # null or empty: every config (Kafka's rule)
            wanted = set(keys)
            configs = [c for c in configs if c["name"] in wanted]
        synonyms, documentation = bool(request.include_synonyms), bool(getattr(request, "include_documentation", False))
        configs = [{**c, "synonyms": c["synonyms"] if synonyms else [],
                    "documentation": c["documentation"] if documentation else None} for c in configs]
        results.append(_described(resource, ErrorCode.none, None, configs))
    return ctx.response({"throttle_time": 0, "results": results})


def describe_error(ctx: RequestContext, request: Any, code: int) -> Any:
    return ctx.response({"throttle_time": 0, "results": [_described(r, code, None, []) for r in request.resources]})


# -- IncrementalAlterConfigs --------------------------------------------------------------------------


def _shape_refusal(resource: Any) -> str | None:
    """Kafka's broker-side refusal (INVALID_REQUEST, before authorization) of a key given twice or a null
    value for any operation but DELETE; None when the resource is well formed."""
    if len({c.name for c in resource.configs}) != len(resource.configs):
        return "Error due to duplicate config keys"
    # AlterConfigs' configs carry no operation: each is a SET
    nulls = [c.name for c in resource.configs
             if int(getattr(c, "config_operation", SET)) != DELETE and c.value is None]
    return f"Null value not supported for : {', '.join(nulls)}" if nulls else None


def _changes(resource: Any) -> list[tuple[str, int, str | None]]:
    changes = []
    for c in resource.configs:
        op = int(c.config_operation)
        if op not in (SET, DELETE):
            raise ShareError(Errors.INVALID_CONFIG, f"Config {c.name}: APPEND and SUBTRACT apply only to list configs")
        changes.append((c.name, op, c.value))
    return changes


async def _alter_topic(ctx: RequestContext, name: str, changes: list, validate_only: bool) -> None:
    store = ctx.broker.store
    current = store.topic_configs(name)
    if current is None:  # Kafka validates the new configs first, then looks the topic up
        store.log_config.for_topic({key: value for key, op, value in changes if op == SET})
        raise ShareError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    updated = dict(current)
    for key, op, value in changes:
        if op == DELETE:
            updated.pop(key, None)
        else:
            updated[key] = value
    await store.alter_topic_configs(name, updated, validate_only=validate_only)


async def _alter_broker(ctx: RequestContext, name: str, changes: list, validate_only: bool) -> None:
    _check_broker_name(ctx, name)
    dynamic = _dynamic(ctx)
    if dynamic is None:
        keys = sorted({key for key, _op, _v in changes})  # Kafka's code for it is INVALID_REQUEST (KAFKA-13609)
        raise ShareError(Errors.INVALID_REQUEST, f"Cannot update these configs dynamically: Set({', '.join(keys)})")
    scope = CLUSTER_DEFAULT if name == "" else NODE
    if validate_only:
        dynamic.validate(scope, changes)
    else:
        dynamic.alter(scope, changes)


async def _alter_group(ctx: RequestContext, name: str, changes: list, validate_only: bool) -> None:
    if not name:
        raise ShareError(Errors.INVALID_REQUEST, "a group resource needs a group id")
    store = _group_store(ctx)
    if validate_only:
        store.validate(name, changes)
    else:
        store.alter(name, changes)


_ALTERERS = {TOPIC: _alter_topic, BROKER: _alter_broker, GROUP: _alter_group}


def _altered(resource: Any, code: int, message: str | None = None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "resource_type": resource.resource_type,
            "resource_name": resource.resource_name}


async def incremental_alter(ctx: RequestContext, request: Any) -> Any:
    twice = _duplicates(request.resources)
    responses = []
    for resource in request.resources:
        key = (int(resource.resource_type), resource.resource_name)
        alterer = _ALTERERS.get(key[0])
        if key in twice:
            responses.append(_altered(resource, ErrorCode.invalid_request,
                                      "Each resource must appear at most once."))
            continue
        malformed = _shape_refusal(resource)
        if malformed is not None:
            responses.append(_altered(resource, ErrorCode.invalid_request, malformed))
            continue
        if key[0] not in _ACL_RESOURCE:  # a type Kafka does not know: its controller's answer
            responses.append(_altered(resource, ErrorCode.unsupported_version, f"Unknown resource type {key[0]}."))
            continue
        refused = _refusal(ctx, resource, AclOperation.ALTER_CONFIGS)
        if refused is not None:
            responses.append(_altered(resource, *refused))
            continue
        if alterer is None:
            responses.append(_altered(resource, ErrorCode.invalid_request,
                                      f"Unsupported resource type {resource.resource_type}"))
            continue
        try:
            await alterer(ctx, resource.resource_name, _changes(resource), bool(request.validate_only))
        except ShareError as exc:
            responses.append(_altered(resource, int(exc.error), exc.message or None))
            continue
        responses.append(_altered(resource, ErrorCode.none))
    return ctx.response({"throttle_time": 0, "responses": responses})


def incremental_alter_error(ctx: RequestContext, request: Any, code: int) -> Any:
    return ctx.response({"throttle_time": 0, "responses": [_altered(r, code) for r in request.resources]})


# -- AlterConfigs (legacy, non-incremental) ----------------------------------------------------------


def _replacing(current: Iterable[str], resource: Any) -> list[tuple[str, int, str | None]]:
    """The incremental changes that make the given configs the resource's whole set (Kafka's REPLACE):
    SET each given key, DELETE each current key not given (it reverts to its default)."""
    given = [(c.name, SET, c.value) for c in resource.configs]
    named = {c.name for c in resource.configs}
    return given + [(key, DELETE, None) for key in sorted(current) if key not in named]


async def _replace(ctx: RequestContext, resource: Any, validate_only: bool) -> None:
    kind, name = int(resource.resource_type), resource.resource_name
    if kind == TOPIC:
        current = ctx.broker.store.topic_configs(name)
        await _alter_topic(ctx, name, _replacing(current or {}, resource), validate_only)
    elif kind == GROUP:
        own = [k for k, (_v, is_own) in _group_store(ctx).effective(name).items() if is_own] if name else []
        await _alter_group(ctx, name, _replacing(own, resource), validate_only)
    else:  # BROKER: the dynamic keys set in the resource's scope are replaced
        _check_broker_name(ctx, name)
        dynamic = _dynamic(ctx)
        current = list(dynamic.values(CLUSTER_DEFAULT if name == "" else NODE)) if dynamic is not None else []
        changes = _replacing(current, resource)
        if changes:
            await _alter_broker(ctx, name, changes, validate_only)


async def legacy_alter(ctx: RequestContext, request: Any) -> Any:
    """AlterConfigs v0-2: each resource's given configs replace all its dynamic configs. Checked in the
    order IncrementalAlterConfigs checks (shape, type, authorization, then the new set)."""
    twice = _duplicates(request.resources)
    responses = []
    for resource in request.resources:
        key = (int(resource.resource_type), resource.resource_name)
        if key in twice:
            responses.append(_altered(resource, ErrorCode.invalid_request, "Each resource must appear at most once."))
            continue
        malformed = _shape_refusal(resource)  # every value is a SET here: a null value is refused
        if malformed is not None:
            responses.append(_altered(resource, ErrorCode.invalid_request, malformed))
            continue
        if key[0] not in _ACL_RESOURCE:
            responses.append(_altered(resource, ErrorCode.unsupported_version, f"Unknown resource type {key[0]}."))
            continue
        refused = _refusal(ctx, resource, AclOperation.ALTER_CONFIGS)
        if refused is not None:
            responses.append(_altered(resource, *refused))
            continue
        if key[0] not in _ALTERERS:
            responses.append(_altered(resource, ErrorCode.invalid_request,
                                      f"AlterConfigs is deprecated and does not support the resource type "
                                      f"{_TYPE_NAMES.get(key[0], key[0])}"))
            continue
        try:
            await _replace(ctx, resource, bool(request.validate_only))
        except ShareError as exc:
            responses.append(_altered(resource, int(exc.error), exc.message or None))
            continue
        responses.append(_altered(resource, ErrorCode.none))
    return ctx.response({"throttle_time": 0, "responses": responses})


_TYPE_NAMES = {BROKER_LOGGER: "BROKER_LOGGER", CLIENT_METRICS: "CLIENT_METRICS"}


HANDLERS = (
    ApiHandler(32, "DescribeConfigs", 1, 4, describe, describe_error),
    ApiHandler(33, "AlterConfigs", 0, 2, legacy_alter, incremental_alter_error),
    ApiHandler(44, "IncrementalAlterConfigs", 0, 1, incremental_alter, incremental_alter_error),
)
