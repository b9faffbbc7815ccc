"""Type stub of the Cython twin (`_native/record_scan.pyx`) of `record_batch.scan_timestamp_deltas`.

Checked against the compiled module by `mypy.stubtest` in `make test`.
"""

__all__ = ["scan_timestamp_deltas", "NATIVE"]

NATIVE: bool

def scan_timestamp_deltas(data: bytes, start: int, end: int, record_count: int,
                          last_offset_delta: int) -> tuple[int, int] | None: ...
