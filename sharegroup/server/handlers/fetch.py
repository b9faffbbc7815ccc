"""Fetch (key 1), versions 4-17: advertised, not yet served.

librdkafka turns on RecordBatch v2 (MsgVer2) only when the broker advertises Produce >= 3 and Fetch >= 4,
so Fetch must be in ApiVersions. Until classic fetching is implemented every requested partition is
answered with UNSUPPORTED_VERSION (and the top-level error in v7+), without touching the logs.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ..api import ApiHandler, RequestContext

_MESSAGE = "Fetch is not implemented by sharegroup serve yet"


def error_response(ctx: RequestContext, request: Any, code: int) -> Any:
    responses = []
    for topic in request.topics:
        ident = {"topic": getattr(topic, "topic", None), "topic_id": getattr(topic, "topic_id", None)}
        partitions = [
            {
                "partition_index": p.partition,
                "error_code": code,
                "high_watermark": -1,
                "last_stable_offset": -1,
                "log_start_offset": -1,
                "aborted_transactions": None,
                "records": b"",
            }
            for p in topic.partitions
        ]
        responses.append({**{k: v for k, v in ident.items() if v is not None}, "partitions": partitions})
    return ctx.response({"throttle_time": 0, "error_code": code, "session_id": 0, "responses": responses})


async def handle(ctx: RequestContext, request: Any) -> Any:
    return error_response(ctx, request, ErrorCode.unsupported_version)


HANDLERS = (ApiHandler(1, "Fetch", 4, 17, handle, error_response),)
