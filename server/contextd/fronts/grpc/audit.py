"""Audit lines: one JSON log line per call on user data, on logger ``contextd.audit``.

Which calls are audited, and which of their fields name resources, is read from the
request and response descriptors once per method, so an RPC added later is covered
without a line of its own:

- a call is on user data when its request names a user: a ``user_id`` field, or a
  ``user_id`` in a singular message field (``session.user_id``). A unary call that
  leaves that message unset names no user (BuildMessages without a session is a plain
  build) and costs one ``HasField``; a streamed one is on user data either way
  (StreamChat without a session is a turn of the credential's user);
- its resource ids are the request's ``*_id`` and ``*_ids`` fields, at the top and in
  singular message fields (``session_id``, ``session.session_id``, ``message_ids``);
  ``user_id`` is logged as the user and ``tool_call_id`` is a model's id, not a stored
  resource;
- a unary response adds the ids it returns (``session.id`` of CreateSession,
  ``memory_id`` of Collect) under ``returned``; a streamed one, those of its first
  message (the session a StreamChat turn created, in ``turn_started``), which costs each
  streamed message one comparison rather than a look at every chat delta.

Every value a caller sent is logged cut (``core.errors.cut``) and a list of ids at most
``MAX_LISTED`` long, so that one call writes one short line, whatever it sent.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import descriptor_pool
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from contextd.core.errors import cut
from contextd.core.identity import DEFAULT_TENANT, Identity

audit_log = logging.getLogger("contextd.audit")

_USER = "user_id"
_NOT_RESOURCES = frozenset({_USER, "tool_call_id"})
# The most ids of one repeated field a line lists; the rest are counted.
MAX_LISTED = 20

# (path of the field, repeated): ("session", "session_id") is session.session_id.
_Field = tuple[tuple[str, ...], bool]


@dataclass(frozen=True, slots=True)
class AuditPlan:
    """What to read from one method's requests and responses."""

    # Where the request names its user: ("user_id",) or ("session", "user_id").
    user_path: tuple[str, ...]
    resources: tuple[_Field, ...]
    returned: tuple[_Field, ...]
    # The call is on user data even when the message holding the user is unset.
    unset_names_caller: bool

    def user_named(self, request: Any) -> str | None:
        """The user the request names ("" when the field is empty: the caller); None
        when the request names no user, so the call is not on user data."""
        if len(self.user_path) == 2:
            if not self.unset_names_caller and not request.HasField(self.user_path[0]):
                return None
            return str(getattr(getattr(request, self.user_path[0]), _USER))
        return str(getattr(request, _USER))

    def write(
        self,
        method: str,
        user: str,
        identity: Identity | None,
        code: grpc.StatusCode,
        request: Any,
        response: Any | None,
    ) -> None:
        """Log the line. ``user``: what the request names; empty means the caller."""
        extra: dict[str, object] = {
            "tenant": identity.tenant_id if identity else DEFAULT_TENANT,
            "user": cut(user or (identity.user_id if identity else "")),
            "credential": cut(identity.credential_id) if identity else "",
            "method": method,
            "code": code.name,
            "resources": _ids(request, self.resources),
        }
        if response is not None and self.returned:
            extra["returned"] = _ids(response, self.returned)
        audit_log.info("audit", extra=extra)


def plan_for(method: str) -> AuditPlan | None:
    """The plan for ``/package.Service/Method``; None when its calls are not on user
    data (or the method has no descriptor here, e.g. one added by a test)."""
    try:
        found = descriptor_pool.Default().FindMethodByName(method.lstrip("/").replace("/", "."))
    except KeyError:
        return None
    if found.client_streaming:
        return None
    request = found.input_type
    user_path = _user_path(request)
    if user_path is None:
        return None
    returned = tuple(_id_fields(found.output_type, "id"))
    resources = tuple(_id_fields(request, ""))
    return AuditPlan(user_path, resources, returned, unset_names_caller=found.server_streaming)


def _user_path(message: Descriptor) -> tuple[str, ...] | None:
    if _USER in message.fields_by_name:
        return (_USER,)
    for field in message.fields:
        inner = _singular_message(field)
        if inner is not None and _USER in inner.fields_by_name:
            return (field.name, _USER)
    return None


def _id_fields(message: Descriptor, nested_plain_id: str) -> Iterator[_Field]:
    """Resource id fields of ``message`` and of its singular message fields; inside
    those, a field named ``nested_plain_id`` counts too (a returned Session's ``id``)."""
    for field in message.fields:
        nested = _singular_message(field)
        if _is_id(field, ""):
            yield (field.name,), field.is_repeated
        elif nested is not None:
            for inner in nested.fields:
                if _is_id(inner, nested_plain_id):
                    yield (field.name, inner.name), inner.is_repeated


def _is_id(field: FieldDescriptor, plain_id: str) -> bool:
    if field.type != FieldDescriptor.TYPE_STRING or field.name in _NOT_RESOURCES:
        return False
    return field.name.endswith(("_id", "_ids")) or (bool(plain_id) and field.name == plain_id)


def _singular_message(field: FieldDescriptor) -> Descriptor | None:
    """The message type of a singular message field; None for any other field."""
    return None if field.is_repeated else field.message_type


def _ids(message: Any, fields: tuple[_Field, ...]) -> dict[str, object]:
    """The non-empty ids, keyed by their dotted field path."""
    found: dict[str, object] = {}
    for path, repeated in fields:
        value = message
        for name in path[:-1]:
            if not value.HasField(name):
                break
            value = getattr(value, name)
        else:
            value = getattr(value, path[-1])
            if value:
                found[".".join(path)] = _listed(value) if repeated else cut(value)
    return found


def _listed(values: Any) -> list[str]:
    """The first MAX_LISTED ids, cut, and a count of the rest."""
    listed = [cut(v) for v in values[:MAX_LISTED]]
    if len(values) > MAX_LISTED:
        listed.append(f"…(+{len(values) - MAX_LISTED} more)")
    return listed
