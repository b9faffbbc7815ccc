"""Selects the bulk frame codec twin and states the contract both implement.

`SHAREGROUP_PUREPYTHON=1` selects the pure-Python twin (`persister.frame_codec_pure`); otherwise the
Cython build (`persister._native_records`, from `_native/records.pyx`) is required and its absence is
an error, never a silent fallback (SPEC §2, STYLE). The choice is made on first use, not on import, so
that importing `persister` (its records, for example, in an audit job's executors that receive only
Python sources) never needs the native build; building a ShareCoordinator or opening a log does.

The codec does the per-record byte work of the persister's two hot paths: recovery (`scan_frames` for
the log's scan, `decode_frames` for the coordinator's bulk replay) and the write path
(`encode_delta_frame`). Every rule stays in Python; the twins only turn bytes into rows and back.
"""

from __future__ import annotations

import functools
import os
from typing import Protocol

__all__ = [
    "FrameCodec",
    "KeyTable",
    "KIND_CHECKPOINT",
    "KIND_DELTA",
    "KIND_TOMBSTONE",
    "NATIVE",
    "frame_codec",
    "native_frame_codec",
    "pure_frame_codec",
]

NATIVE = os.environ.get("SHAREGROUP_PUREPYTHON") != "1"

# The kinds of decoded rows (shared by both twins; a test checks the native module agrees).
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


class FrameCodec(Protocol):
    """The contract of both twins (see `persister.frame_codec_pure` for the row layout)."""

    NATIVE: bool

    def scan_frames(self, buf, pos: int, end: int, max_count: int = -1) -> tuple[int, int]: ...
    def decode_frames(self, buf, pos: int, end: int, keys: KeyTable) -> tuple[list, int]: ...
    def encode_delta_frame(self, encoded_key: bytes, value, pack=None) -> bytes: ...


def pure_frame_codec() -> FrameCodec:
    from . import frame_codec_pure

    return frame_codec_pure  # type: ignore[return-value]


def native_frame_codec() -> FrameCodec:
    """The Cython twin; raises ImportError with a clear message when the extension is not built."""
    try:
        from . import _native_records  # type: ignore[attr-defined]
    except ImportError as exc:
        raise ImportError(
            "the native record codec (persister._native_records) is not built: run `make build` (or "
            "`python setup.py build_ext --inplace`), or set SHAREGROUP_PUREPYTHON=1 to use the "
            f"pure-Python twin ({exc})"
        ) from exc
    return _native_records  # type: ignore[return-value]


@functools.lru_cache(maxsize=1)
def frame_codec() -> FrameCodec:
    """The twin this process uses (chosen once by SHAREGROUP_PUREPYTHON)."""
    return native_frame_codec() if NATIVE else pure_frame_codec()
