"""The broker configs `sharegroup serve` lets IncrementalAlterConfigs change while it runs: KIP-1191's two
dead-letter queue keys, dynamic cluster configs in Kafka 4.4 (every other broker key is static here).

As in Kafka, a value is set either for this node (BROKER resource named by the node id; source
DYNAMIC_BROKER_CONFIG) or as the cluster-wide default (resource ""; DYNAMIC_DEFAULT_BROKER_CONFIG); the
effective value is the node's, else the cluster default's, else the static one (server.properties /
`--override`, else Kafka's default). The values are durable in one small JSON file,
`DIR/groups/broker-configs.json`, replaced atomically (written, fsync'd, renamed) on every change.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Iterable

from ..errors import Errors, ShareError
from ..topics.segment_files import write_file_atomically
from .broker_config import CONFIG_DEFS, ServeConfig

__all__ = ["DYNAMIC_BROKER_KEYS", "DynamicBrokerConfigs", "NODE", "CLUSTER_DEFAULT"]

DYNAMIC_BROKER_KEYS = ("errors.deadletterqueue.topic.name.prefix", "errors.deadletterqueue.auto.create.topics.enable")
NODE, CLUSTER_DEFAULT = "node", "default"  # the two scopes of a dynamic value
FILE_NAME = "broker-configs.json"
SET, DELETE = 0, 1


class DynamicBrokerConfigs:
    """The dynamic values of `DYNAMIC_BROKER_KEYS` per scope, and the effective value of each."""

    def __init__(self, directory: Path | str, config: ServeConfig,
                 fsync: Callable[[int], None] | None = os.fsync) -> None:
        self.path = os.path.join(str(directory), FILE_NAME)
        self.config = config
        self._fsync = fsync
        self._values: dict[str, dict[str, Any]] = self._read()

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            with open(self.path, "rb") as f:
                doc = json.loads(f.read())
        except FileNotFoundError:
            return {NODE: {}, CLUSTER_DEFAULT: {}}
        if not isinstance(doc, dict) or doc.get("version") != 1:
            raise ValueError(f"{self.path}: not a broker configs file of version 1")
        return {scope: {k: CONFIG_DEFS[k].parse(v) for k, v in dict(doc.get(scope, {})).items()
                        if k in DYNAMIC_BROKER_KEYS} for scope in (NODE, CLUSTER_DEFAULT)}

    def value(self, key: str) -> Any:
        """The effective value of `key` (a dynamic key, or any static broker key)."""
        for scope in (NODE, CLUSTER_DEFAULT):
            if key in self._values[scope]:
                return self._values[scope][key]
        return self.config[key]

    def __getitem__(self, key: str) -> Any:
        return self.value(key)

    def values(self, scope: str) -> dict[str, Any]:
        """The dynamic values set in `scope` (NODE or CLUSTER_DEFAULT)."""
        return dict(self._values[scope])

    def validate(self, scope: str, changes: Iterable[tuple[str, int, str | None]]) -> dict[str, Any]:
        """The scope's values after `changes` ((key, SET or DELETE, value)). INVALID_REQUEST (Kafka's code for
        a static key) when a key cannot be changed dynamically; INVALID_CONFIG for a bad value."""
        changes = list(changes)
        static = sorted({key for key, _op, _v in changes if key not in DYNAMIC_BROKER_KEYS})
        if static:
            raise ShareError(Errors.INVALID_REQUEST, f"Cannot update these configs dynamically: Set({', '.join(static)})")
        values = dict(self._values[scope])
        for key, op, raw in changes:
            if op == DELETE:
                values.pop(key, None)
            elif op == SET:
                try:
                    values[key] = CONFIG_DEFS[key].parse(raw)
                except ValueError as exc:
                    raise ShareError(Errors.INVALID_CONFIG, f"Invalid value {raw} for configuration {key}: {exc}") from None
            else:
                raise ShareError(Errors.INVALID_CONFIG, f"Config {key}: only SET and DELETE apply to broker configs")
        return values

    def alter(self, scope: str, changes: Iterable[tuple[str, int, str | None]]) -> None:
        """Apply `changes` (see `validate`) and make them durable before returning."""
        values = self.validate(scope, changes)
        updated = {**self._values, scope: values}
        doc = {"version": 1, **{s: {k: _text(v) for k, v in vs.items()} for s, vs in updated.items()}}
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            write_file_atomically(self.path, json.dumps(doc, indent=1, sort_keys=True).encode(), self._fsync)
        except OSError as exc:
            raise ShareError(Errors.KAFKA_STORAGE_ERROR, f"writing {self.path}: {exc}") from exc
        self._values = updated


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
