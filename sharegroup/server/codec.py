"""The kio glue: request headers, message classes by (API key, version), and response encoding.

kio (message classes generated from Kafka's JSON schemas) is the only codec; nothing here encodes a
message field by hand, except a response header's correlation id (an int32 before the rest of the header,
which kio encodes once per header version). Handlers describe a response as plain dicts and lists, and `build` turns them
into the kio dataclass of the version the client asked for, keeping only the fields that version has,
so one handler serves every version of its API.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import types
import typing
import uuid
from functools import lru_cache
from typing import Any

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError
from kio.static.primitive import i32Timedelta, i64Timedelta

__all__ = [
    "API_VERSIONS_KEY",
    "DecodeFailure",
    "EncodedResponse",
    "RequestHeader",
    "build",
    "decode_body",
    "decode_header",
    "encode_body",
    "encode_response",
    "request_class",
    "response_class",
]

API_VERSIONS_KEY = 18
RequestHeader = RequestHeaderV1  # v1 and v2 carry the same four fields; v2 adds a tag buffer
_MAX_NESTING = 16


class DecodeFailure(Exception):
    """A frame that does not decode: the connection that sent it is closed."""


@lru_cache(maxsize=None)
def request_class(api_key: int, version: int) -> type | None:
    """kio's request class for (key, version), or None when kio has no such message."""
    try:
        return load_request_schema(api_key, version)
    except (KioIndexError, ImportError):
        return None


@lru_cache(maxsize=None)
def response_class(api_key: int, version: int) -> type:
    return load_response_schema(api_key, version)


def decode_header(frame: bytes | memoryview) -> tuple[Any, int]:
    """Read the request header (v1 or v2, chosen from the API's schema) and return it with its size.

    The first four fields are identical in v1 and v2, so v1 is read first to learn the key and version;
    a flexible request (header v2) then has a tag buffer after the client id. An ApiVersions request of a
    version this broker does not know is read as Kafka does: v3+ ApiVersions are flexible.
    """
    try:
        header, size = entity_reader(RequestHeaderV1)(frame, 0)
    except (SerialError, ValueError, OverflowError) as exc:
        raise DecodeFailure(f"bad request header: {exc}") from None
    cls = request_class(header.request_api_key, header.request_api_version)
    if cls is not None:
        flexible = cls.__header_schema__ is RequestHeaderV2
    else:
        flexible = header.request_api_key == API_VERSIONS_KEY and header.request_api_version >= 3
    if flexible:
        try:
            header, size = entity_reader(RequestHeaderV2)(frame, 0)
        except (SerialError, ValueError, OverflowError) as exc:
            raise DecodeFailure(f"bad request header: {exc}") from None
    return header, size


def decode_body(cls: type, frame: bytes | memoryview, offset: int) -> Any:
    """Decode a request body with kio; any failure is a `DecodeFailure`."""
    try:
        body, _size = entity_reader(cls)(frame, offset)
    except (SerialError, ValueError, OverflowError, TypeError, UnicodeDecodeError) as exc:
        raise DecodeFailure(f"cannot decode {cls.__name__} v{cls.__version__}: {type(exc).__name__}: {exc}") from None
    return body


@dataclasses.dataclass(frozen=True, slots=True)
class EncodedResponse:
    """A response body encoded once, for an answer that is the same every time (ApiVersions'): answering
    it writes a header and these bytes instead of encoding the body again."""

    header_schema: type
    body: bytes


def encode_body(body: Any) -> EncodedResponse:
    """`body` encoded once (see `EncodedResponse`)."""
    buf = io.BytesIO()
    entity_writer(type(body))(buf, body)
    return EncodedResponse(type(body).__header_schema__, buf.getvalue())


def encode_response(correlation_id: int, body: Any) -> bytes:
    """Size prefix + response header (v0 or v1, as the message's schema says; ApiVersions is always v0) + body
    (a kio response, or an `EncodedResponse`)."""
    if isinstance(body, EncodedResponse):
        header_tail = _header_tail(body.header_schema)
        encoded = body.body
    else:
        cls: Any = type(body)
        header_tail = _header_tail(cls.__header_schema__)
        buf = io.BytesIO()
        _writer(cls)(buf, body)
        encoded = buf.getvalue()
    size = 4 + len(header_tail) + len(encoded)
    return b"".join(((size).to_bytes(4, "big"), correlation_id.to_bytes(4, "big", signed=True), header_tail, encoded))


@lru_cache(maxsize=None)
def _writer(cls: type) -> Any:
    """kio's writer of `cls` (looked up once per class)."""
    return entity_writer(cls)


@lru_cache(maxsize=None)
def _header_tail(header_cls: type) -> bytes:
    """What follows the correlation id in a response header of `header_cls`, encoded once by kio (nothing
    for v0; v1's empty tag buffer): every response header is its correlation id (int32, first) and this."""
    buf = io.BytesIO()
    entity_writer(header_cls)(buf, header_cls(correlation_id=0x01020304))
    encoded = buf.getvalue()
    assert encoded[:4] == b"\x01\x02\x03\x04", header_cls
    return encoded[4:]


# -- building kio dataclasses from plain data --------------------------------------------------------


@lru_cache(maxsize=None)
def _plan(cls: type) -> dict[str, tuple[str, Any]]:
    """For each field of a kio class: how to convert a plain value into it (kind, nested class)."""
    plan: dict[str, tuple[str, Any]] = {}
    for f in dataclasses.fields(cls):
        tp = f.type
        if typing.get_origin(tp) in (typing.Union, types.UnionType):
            non_null = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(non_null) == 1 and typing.get_origin(non_null[0]) is tuple:
                tp = non_null[0]  # a nullable array: None passes through unchanged below
        args = typing.get_args(tp)
        origin = typing.get_origin(tp)
        if origin is tuple and args and dataclasses.is_dataclass(args[0]):
            plan[f.name] = ("entities", args[0])
        elif origin in (typing.Union, types.UnionType) and any(dataclasses.is_dataclass(a) for a in args):
            plan[f.name] = ("entity", next(a for a in args if dataclasses.is_dataclass(a)))
        elif dataclasses.is_dataclass(tp):
            plan[f.name] = ("entity", tp)
        elif tp is ErrorCode:
            plan[f.name] = ("error", None)
        elif isinstance(tp, type) and issubclass(tp, (i32Timedelta, i64Timedelta)):
            plan[f.name] = ("ms", None)
        elif origin is tuple:
            plan[f.name] = ("tuple", None)
        else:
            plan[f.name] = ("plain", None)
    return plan


def build(cls: type, data: dict[str, Any], _depth: int = 0) -> Any:
    """Make an instance of kio class `cls` from a dict; keys the class lacks (other versions) are dropped.

    Nested entities are dicts (or lists of dicts); error codes are ints; durations are milliseconds.
    A field the class needs and the dict lacks keeps the class's default (a bug if it has none).
    """
    assert _depth < _MAX_NESTING, "response nesting too deep"
    plan = _plan(cls)
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        how = plan.get(name)
        if how is None:
            continue
        kind, sub = how
        if value is None and kind in ("entities", "tuple"):
            pass
        elif kind == "entities":
            value = tuple(item if isinstance(item, sub) else build(sub, item, _depth + 1) for item in value)
        elif kind == "entity":
            value = None if value is None else (value if isinstance(value, sub) else build(sub, value, _depth + 1))
        elif kind == "error":
            value = ErrorCode(int(value))
        elif kind == "ms" and not isinstance(value, datetime.timedelta):
            value = datetime.timedelta(milliseconds=int(value))
        elif kind == "tuple":
            value = tuple(value)
        kwargs[name] = value
    return cls(**kwargs)


ZERO_UUID = uuid.UUID(int=0)
