"""Selects the bulk frame codec twin and states the contract both implement.

`SHAREGROUP_PUREPYTHON=1` selects the pure-Python twin (`persister.frame_codec_pure`); otherwise the
Cython build (`persister._native_records`, from `_native/records.pyx`) is required and its absence is
an error, never a silent fallback. The choice is made on first use, not on import, so
that importing `persister` (its records, for example, in an audit job's executors that receive only
Python sources) never needs the native build; building a ShareCoordinator or opening a log does.

The codec does the per-record byte work of the persister's two hot paths: recovery (`scan_frames` for
the log's scan, `decode_frames` for the coordinator's bulk replay) and the write path
(`encode_delta_frame`). Every rule stays in Python; the twins only turn bytes into rows and back.
The row vocabulary (`KIND_*`, `KeyTable`) lives in the leaf module `persister.frame_rows`, which
both twins import; it is re-exported here.
"""

from __future__ import annotations

import functools
import importlib
import os
from typing import Protocol

from .frame_rows import KIND_CHECKPOINT, KIND_DELTA, KIND_TOMBSTONE, KeyTable

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
        # By its full name: `from . import _native_records` imports the package `persister` and takes
        # the name from it, a dependency on the package's __init__, which imports this module.
        native = importlib.import_module("persister._native_records")
    except ImportError as exc:
        raise ImportError(
            "the native record codec (persister._native_records) is not built: run `make build` (or "
            "`python setup.py build_ext --inplace`), or set SHAREGROUP_PUREPYTHON=1 to use the "
            f"pure-Python twin ({exc})"
        ) from exc
    return native


@functools.lru_cache(maxsize=1)
def frame_codec() -> FrameCodec:
    """The twin this process uses (chosen once by SHAREGROUP_PUREPYTHON)."""
    return native_frame_codec() if NATIVE else pure_frame_codec()
