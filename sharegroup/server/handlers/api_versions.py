"""ApiVersions (key 18), versions 0-4: the APIs and versions this broker serves.

The list comes from the handler registry, so what is advertised is exactly what is dispatched. A v3+
request whose client software name or version breaks Kafka's pattern gets INVALID_REQUEST (as Kafka).
The response header is always v0 (kio's schema says so), even for the flexible v3+ bodies. v3+ also
report the features (tagged fields): `share.version` supported 0-2 and finalized at 2, as on a freshly
formatted Kafka 4.4 cluster (level 2 turns on dead-letter queues for share groups, KIP-1191). Kafka's v3
omits supported features whose minimum is 0, so v3 lists the finalized level only. An unknown
ApiVersions version is answered by the connection (UNSUPPORTED_VERSION in a v0 body). The answer of a
version is encoded once (per handler registry): clients ask on every connection, and a client asking
over and over must not cost an encoding each time.
"""

from __future__ import annotations

import re
import weakref
from typing import Any

from kio.schema.errors import ErrorCode

from ..api import ApiHandler, HandlerRegistry, RequestContext
from ..codec import EncodedResponse, encode_body
from ..features import FEATURES, FINALIZED_FEATURES_EPOCH

_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def _valid(request: Any) -> bool:
    name = getattr(request, "client_software_name", None)
    version = getattr(request, "client_software_version", None)
    if name is None:  # v0-v2 carry no software name
        return True
    return bool(_SOFTWARE.match(name)) and bool(_SOFTWARE.match(version or ""))


# The answer of each version, encoded once per registry (it only changes with the registry).
_ANSWERS: weakref.WeakKeyDictionary[HandlerRegistry, dict[int, EncodedResponse]] = weakref.WeakKeyDictionary()


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not _valid(request):
        return error_response(ctx, request, ErrorCode.invalid_request)
    answers = _ANSWERS.setdefault(ctx.broker.registry, {})
    answer = answers.get(ctx.api_version)
    if answer is None:
        keys = [
            {"api_key": key, "min_version": lo, "max_version": hi}
            for key, lo, hi in ctx.broker.registry.advertised()
        ]
        answer = encode_body(ctx.response({"error_code": ErrorCode.none, "api_keys": keys, "throttle_time": 0,
                                           **_features(ctx.api_version)}))
        answers[ctx.api_version] = answer
    return answer


def _features(api_version: int) -> dict[str, Any]:
    if api_version < 3:
        return {}
    return {
        "supported_features": [{"name": name, "min_version": lo, "max_version": hi}
                               for name, (lo, hi, _level) in FEATURES.items() if api_version >= 4 or lo > 0],
        "finalized_features_epoch": FINALIZED_FEATURES_EPOCH,
        "finalized_features": [{"name": name, "max_version_level": level, "min_version_level": level}
                               for name, (_lo, _hi, level) in FEATURES.items()],
    }


def error_response(ctx: RequestContext, request: Any, code: int) -> Any:
    return ctx.response({"error_code": code, "api_keys": [], "throttle_time": 0})


HANDLERS = (ApiHandler(18, "ApiVersions", 0, 4, handle, error_response),)
