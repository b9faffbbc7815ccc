"""The handler registry: one module per API family, advertised exactly as dispatched."""

from __future__ import annotations

import types

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from sharegroup.server.api import ApiHandler, HandlerRegistry
from sharegroup.server.codec import build
from sharegroup.server.handlers import HANDLER_MODULES, all_handlers
from tests.server_harness import BrokerThread, RawClient


def test_every_served_api_has_one_module_and_kio_knows_every_advertised_version():
    registry = HandlerRegistry(all_handlers())
    assert registry.advertised() == [(0, 3, 12), (1, 4, 17), (2, 1, 9), (3, 0, 13), (8, 2, 9), (9, 1, 9), (10, 0, 6), (11, 0, 9), (12, 0, 4), (13, 0, 5),
                                     (14, 0, 5), (15, 0, 6), (16, 0, 5), (17, 0, 1), (18, 0, 4), (19, 2, 7), (20, 1, 6), (21, 0, 2), (22, 0, 5),
                                     (24, 0, 5), (25, 0, 4), (26, 0, 4), (27, 1, 1), (28, 0, 4), (29, 1, 3),
                                     (30, 1, 3), (31, 1, 3), (32, 1, 4), (33, 0, 2), (36, 0, 2), (37, 0, 3), (42, 0, 2), (44, 0, 1), (47, 0, 0), (50, 0, 0), (51, 0, 0),
                                     (61, 0, 0), (65, 0, 0), (66, 0, 2), (68, 0, 1), (69, 0, 1), (76, 1, 1), (77, 1, 1), (78, 1, 2),
                                     (79, 1, 2), (90, 0, 1), (91, 0, 0), (92, 0, 0)]
    assert all(len(m.HANDLERS) >= 1 for m in HANDLER_MODULES)
    assert registry.get(3, 13) is not None and registry.get(3, 14) is None and registry.get(76, 0) is None


def test_a_key_registered_twice_is_refused():
    handler = all_handlers()[0]
    with pytest.raises(ValueError, match="registered twice"):
        HandlerRegistry([handler, handler])


def test_a_new_api_family_is_one_module_and_one_registration(tmp_path):
    """What the share-group APIs do: a module with HANDLERS, added to the handler list (here a stand-in
    for ShareGroupHeartbeat replaces the real one)."""

    async def handle(ctx, request):
        return ctx.response({"throttle_time": 0, "error_code": ErrorCode.group_id_not_found, "error_message": "none here",
                             "member_id": None, "member_epoch": 0, "heartbeat_interval": 0, "assignment": None})

    family = types.SimpleNamespace(HANDLERS=(ApiHandler(76, "ShareGroupHeartbeat", 1, 1, handle),))
    b = BrokerThread(tmp_path)
    b.broker.registry = HandlerRegistry([*(h for h in all_handlers() if h.api_key != 76), *family.HANDLERS])
    try:
        client = RawClient(b.broker.port)
        versions = client.request(18, 3, build(load_request_schema(18, 3), {
            "client_software_name": "t", "client_software_version": "1"}))
        assert (76, 1, 1) in [(k.api_key, k.min_version, k.max_version) for k in versions.api_keys]
        body = build(load_request_schema(76, 1), {"group_id": "g", "member_id": "m", "member_epoch": 0,
                                                  "rack_id": None, "subscribed_topic_names": ["t"]})
        resp = client.request(76, 1, body)
        assert (resp.error_code, resp.error_message) == (ErrorCode.group_id_not_found, "none here")
    finally:
        b.stop()
