"""The vocabulary of decoded rows, shared by both frame-codec twins and their callers: a leaf module.

A decoded row (see `persister.frame_codec_pure` for the layouts) starts with a key id and one of the
`KIND_*` values; the key id indexes a `KeyTable`. Both twins (`persister.frame_codec_pure` and the
Cython `persister._native_records`) import these from here, and so do the replay and the audit; this
module imports nothing of the package, so no import circle can pass through it.
"""

from __future__ import annotations

__all__ = ["KIND_CHECKPOINT", "KIND_DELTA", "KIND_TOMBSTONE", "KeyTable"]

# The kinds of decoded rows (a test checks the native module agrees).
KIND_CHECKPOINT = 0
KIND_DELTA = 1
KIND_TOMBSTONE = 2


class KeyTable:
    """The keys met while decoding one log: `keys[i]` is the StateKey of key id i.

    `ids` maps a key's stored form (a twin's own choice: the pure one uses the decoded tuple, the native
    one the exact bytes) to its id, and `by_key` maps each StateKey to its id, so that two stored forms
    of one key (msgpack allows more than one) still get one id.
    """

    __slots__ = ("keys", "ids", "by_key")

    def __init__(self) -> None:
        self.keys: list = []
        self.ids: dict = {}
        self.by_key: dict = {}

    def add(self, stored_form, key) -> int:
        """The id of `key` (a new one if it is new), remembered for `stored_form` too."""
        key_id = self.by_key.get(key)
        if key_id is None:
            key_id = self.by_key[key] = len(self.keys)
            self.keys.append(key)
        self.ids[stored_form] = key_id
        return key_id
