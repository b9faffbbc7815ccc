"""Type stub of the Cython twin (`_native/records.pyx`): it claims `persister.frame_codec.FrameCodec`.

The pure twin `persister.frame_codec_pure` has the same names, signatures and behaviour.
"""

from persister.frame_codec import KeyTable
from persister.state_records import ShareDelta

__all__ = ["scan_frames", "decode_frames", "encode_delta_frame", "crc32c", "NATIVE", "KIND_CHECKPOINT",
           "KIND_DELTA", "KIND_TOMBSTONE"]

NATIVE: bool
KIND_CHECKPOINT: int
KIND_DELTA: int
KIND_TOMBSTONE: int

def scan_frames(buf: bytes | bytearray | memoryview, pos: int, end: int, max_count: int = -1) -> tuple[int, int]: ...
def decode_frames(buf: bytes | bytearray | memoryview, pos: int, end: int, keys: KeyTable) -> tuple[list, int]: ...
def encode_delta_frame(encoded_key: bytes, value: ShareDelta, pack: object = None) -> bytes: ...
def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """The CRC32C of `data` continuing from `value`, as `crc32c.crc32c` (for the parity test)."""
