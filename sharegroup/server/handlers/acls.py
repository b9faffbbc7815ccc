"""DescribeAcls (key 29), CreateAcls (30) and DeleteAcls (31), versions 1-3: the AdminClient's ACL calls.

(Versions 1-3 are what Kafka 4 serves; v0, without pattern types, is gone there too.)

Kafka's rules, in Kafka's order:
- DescribeAcls needs DESCRIBE on the CLUSTER, CreateAcls and DeleteAcls ALTER on it; without it the
  whole request answers CLUSTER_AUTHORIZATION_FAILED (31);
- on a broker without `authorizer.class.name` every request answers SECURITY_DISABLED (54): DescribeAcls
  at top level ("No Authorizer is configured on the broker"), Create/Delete per entry ("No Authorizer is
  configured.");
- a CreateAcls creation with an UNKNOWN (id 0) resource type, pattern type, operation or permission fails
  Kafka's request validation: the connection closes without an answer and nothing is created;
- CreateAcls answers per creation: NONE (creating an existing ACL changes nothing) or INVALID_REQUEST
  with Kafka's message (see `acls.creation_problem`); the valid ones are created (durably) even when
  others in the same request are refused;
- DescribeAcls and DeleteAcls take filters (`acls.AclBindingFilter`); an UNKNOWN (id 0) element in a
  filter fails Kafka's request validation (the connection closes, no filter runs); an id Kafka does not
  know at all parses as UNKNOWN: DescribeAcls matches nothing with it (Kafka checks no describe filter),
  DeleteAcls answers INVALID_REQUEST for that filter.
  DeleteAcls lists, per filter, the ACLs it removed.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ..api import ApiHandler, CloseConnection, RequestContext
from ..authorization import CLUSTER_NAME, AclOperation, ResourceType
from ..security.acls import AclBinding, AclBindingFilter, AclPermissionType, PatternType, enum_or_unknown
from ..security.authorizer import StandardAuthorizer

NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"
NO_AUTHORIZER = "No Authorizer is configured."


def _acl_authorizer(ctx: RequestContext) -> StandardAuthorizer | None:
    """The broker's ACL authorizer (`authorizer.class.name` set); None without one (AllowEveryone): the
    ACL APIs then answer SECURITY_DISABLED."""
    authorizer = ctx.broker.authorizer
    return authorizer if isinstance(authorizer, StandardAuthorizer) else None


def _filter(item: Any) -> AclBindingFilter:
    """A kio DescribeAcls request or DeleteAcls filter as an `AclBindingFilter` (unknown ids: UNKNOWN)."""
    return AclBindingFilter(
        resource_type=enum_or_unknown(ResourceType, item.resource_type_filter),
        name=item.resource_name_filter,
        pattern_type=enum_or_unknown(PatternType, item.pattern_type_filter),
        principal=item.principal_filter,
        host=item.host_filter,
        operation=enum_or_unknown(AclOperation, item.operation),
        permission=enum_or_unknown(AclPermissionType, item.permission_type),
    )


# -- DescribeAcls -------------------------------------------------------------------------------------


def _unknown_in_filter(item: Any) -> bool:
    """Whether a DescribeAcls request or DeleteAcls filter holds an UNKNOWN (id 0) element: Kafka's request
    classes refuse it while parsing (the connection closes). Other unknown ids parse as UNKNOWN (see the
    module docstring)."""
    return 0 in (int(item.resource_type_filter), int(item.pattern_type_filter), int(item.operation),
                 int(item.permission_type))


async def describe_acls(ctx: RequestContext, request: Any) -> Any:
    if _unknown_in_filter(request):
        raise CloseConnection("DescribeAclsRequest contains UNKNOWN elements")
    authorizer = _acl_authorizer(ctx)
    if authorizer is None:
        return describe_error(ctx, request, ErrorCode.security_disabled, NO_AUTHORIZER_DESCRIBE)
    if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return describe_error(ctx, request, ErrorCode.cluster_authorization_failed)
    acl_filter = _filter(request)  # Kafka checks no filter here: one with an UNKNOWN element matches nothing
    resources: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for b in authorizer.acls(acl_filter):
        resources.setdefault((b.resource_type, b.name, b.pattern_type), []).append(
            {"principal": b.principal, "host": b.host, "operation": b.operation, "permission_type": b.permission})
    return ctx.response({"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "resources": [
        {"resource_type": rt, "resource_name": name, "pattern_type": pt, "acls": entries}
        for (rt, name, pt), entries in resources.items()]})


def describe_error(ctx: RequestContext, request: Any, code: int, message: str | None = None) -> Any:
    return ctx.response({"throttle_time": 0, "error_code": code, "error_message": message, "resources": []})


# -- CreateAcls ---------------------------------------------------------------------------------------


def _binding(creation: Any) -> AclBinding:
    return AclBinding(
        enum_or_unknown(ResourceType, creation.resource_type), creation.resource_name,
        enum_or_unknown(PatternType, creation.resource_pattern_type),
        creation.principal, creation.host, enum_or_unknown(AclOperation, creation.operation),
        enum_or_unknown(AclPermissionType, creation.permission_type),
    )


def _has_unknown_element(creation: Any) -> bool:
    """Whether a creation holds an UNKNOWN (id 0) element: Kafka's CreateAclsRequest.validate refuses the
    whole request while parsing it (the connection closes). Other unknown ids parse as UNKNOWN and are
    refused for that creation only (INVALID_REQUEST)."""
    return 0 in (int(creation.resource_type), int(creation.resource_pattern_type), int(creation.operation),
                 int(creation.permission_type))


async def create_acls(ctx: RequestContext, request: Any) -> Any:
    if any(_has_unknown_element(c) for c in request.creations):
        raise CloseConnection("CreatableAcls contain unrecognized elements.")
    authorizer = _acl_authorizer(ctx)
    if authorizer is None:
        return create_error(ctx, request, ErrorCode.security_disabled, NO_AUTHORIZER)
    if not ctx.authorized(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return create_error(ctx, request, ErrorCode.cluster_authorization_failed)
    problems = await authorizer.create_acls([_binding(c) for c in request.creations])
    return ctx.response({"throttle_time": 0, "results": [
        {"error_code": ErrorCode.none if p is None else ErrorCode.invalid_request, "error_message": p}
        for p in problems]})


def create_error(ctx: RequestContext, request: Any, code: int, message: str | None = None) -> Any:
    return ctx.response({"throttle_time": 0, "results": [{"error_code": code, "error_message": message}
                                                         for _ in request.creations]})


# -- DeleteAcls ---------------------------------------------------------------------------------------


def _matching(b: AclBinding) -> dict[str, Any]:
    return {"error_code": ErrorCode.none, "error_message": None, "resource_type": b.resource_type,
            "resource_name": b.name, "pattern_type": b.pattern_type, "principal": b.principal, "host": b.host,
            "operation": b.operation, "permission_type": b.permission}


async def delete_acls(ctx: RequestContext, request: Any) -> Any:
    if any(_unknown_in_filter(f) for f in request.filters):
        raise CloseConnection("Filters contain UNKNOWN elements")
    authorizer = _acl_authorizer(ctx)
    if authorizer is None:
        return delete_error(ctx, request, ErrorCode.security_disabled, NO_AUTHORIZER)
    if not ctx.authorized(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return delete_error(ctx, request, ErrorCode.cluster_authorization_failed)
    results = await authorizer.delete_acls([_filter(f) for f in request.filters])
    return ctx.response({"throttle_time": 0, "filter_results": [
        {"error_code": ErrorCode.none if problem is None else ErrorCode.invalid_request, "error_message": problem,
         "matching_acls": [_matching(b) for b in removed]}
        for problem, removed in results]})


def delete_error(ctx: RequestContext, request: Any, code: int, message: str | None = None) -> Any:
    return ctx.response({"throttle_time": 0, "filter_results": [
        {"error_code": code, "error_message": message, "matching_acls": []} for _ in request.filters]})


HANDLERS = (
    ApiHandler(29, "DescribeAcls", 1, 3, describe_acls, describe_error),
    ApiHandler(30, "CreateAcls", 1, 3, create_acls, create_error),
    ApiHandler(31, "DeleteAcls", 1, 3, delete_acls, delete_error),
)
