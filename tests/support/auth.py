"""API keys made with the real `contextd keys` command, and every RPC of contextd.v1 read
from the generated descriptors, for the authentication tests."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from contextd import v1
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, MethodDescriptor
from google.protobuf.message import Message


def keys_command(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``contextd keys ARGS --data-dir DATA_DIR``, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "contextd", "keys", *args, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def create_key(data_dir: Path, user: str, *extra: str) -> str:
    """A new key for ``user``: the token `keys create` prints on stdout."""
    done = keys_command(data_dir, "create", "--user", user, *extra)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def key_id(token: str) -> str:
    return token.split("_")[1]


def bearer(token: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")]


@dataclass(frozen=True)
class Rpc:
    method: MethodDescriptor

    @property
    def path(self) -> str:
        """``package.Service/Method``, as the web port's URL and (after a /) grpc name it."""
        return f"{self.method.containing_service.full_name}/{self.method.name}"

    @property
    def user_id_field(self) -> str | None:
        """Where the request names its user (``user_id`` or ``session.user_id``), if it does."""
        return _user_id_field(self.method.input_type)

    def request(self, user_id: str = "") -> Message:
        """An empty request; with ``user_id`` set in its user field, when it has one."""
        message = message_factory.GetMessageClass(self.method.input_type)()
        if user_id and self.user_id_field:
            *parents, leaf = self.user_id_field.split(".")
            target = message
            for name in parents:
                target = getattr(target, name)
            setattr(target, leaf, user_id)
        return message

    def __str__(self) -> str:
        return self.path


def _user_id_field(message: Descriptor, depth: int = 0) -> str | None:
    for field in message.fields:
        if field.name == "user_id":
            return field.name
    if depth == 0:
        for field in message.fields:
            if field.message_type is not None and not field.is_repeated:
                inner = _user_id_field(field.message_type, depth + 1)
                if inner:
                    return f"{field.name}.{inner}"
    return None


def every_rpc() -> Iterator[Rpc]:
    """Every method of every service in the contextd.v1 package."""
    for info in pkgutil.iter_modules(v1.__path__):
        if not info.name.endswith("_pb2"):
            continue
        module = importlib.import_module(f"contextd.v1.{info.name}")
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                yield Rpc(method)


@dataclass(frozen=True)
class StoredIds:
    """Resources stored for one user of one tenant, named the way requests name them."""

    session_id: str
    message_id: str
    memory_id: str


# Fields that name a stored resource, by field name, and what they are set to.
_ID_FIELDS = {
    "session_id": lambda ids: ids.session_id,
    "message_id": lambda ids: ids.message_id,
    "start_message_id": lambda ids: ids.message_id,
    "memory_id": lambda ids: ids.memory_id,
}
# Fields a request needs to get past validation, so that its ids are looked up.
_TEXT_FIELDS = {"user_message": "hello", "summary": "a summary", "content": "a note"}
_NUMBER_FIELDS = {"token_budget": 4096}


def with_ids(rpc: Rpc, ids: StoredIds, user_id: str, query: str) -> tuple[Message, bool]:
    """``rpc``'s request naming ``user_id`` and, in every field that names a stored
    resource (at the top level or in a sub-message such as ``session``), one of ``ids``;
    with the text a valid request needs, and ``query`` as a search query. Returns the
    request and whether it names any of ``ids``."""
    request = rpc.request(user_id)
    named = _fill(request, ids, query, top=True)
    confirm = request.DESCRIPTOR.fields_by_name.get("confirm_user_id")
    if confirm is not None:  # DeleteUser: the user named, once more
        request.MergeFrom(
            message_factory.GetMessageClass(rpc.method.input_type)(**{confirm.name: user_id})
        )
    return request, named


def _fill(message: Message, ids: StoredIds, query: str, top: bool) -> bool:
    named = False
    for field in message.DESCRIPTOR.fields:
        name = field.name
        if name in _ID_FIELDS and not field.is_repeated:
            setattr(message, name, _ID_FIELDS[name](ids))
            named = True
        elif name == "message_ids" and field.is_repeated:
            getattr(message, name).append(ids.message_id)
            named = True
        elif name in _TEXT_FIELDS and not field.is_repeated and field.message_type is None:
            setattr(message, name, _TEXT_FIELDS[name])
        elif name in _NUMBER_FIELDS and not field.is_repeated:
            setattr(message, name, _NUMBER_FIELDS[name])
        elif name == "query":
            setattr(message, name, query)
        elif name == "update_mask":  # UpdateMemory: a new text
            getattr(message, name).paths.append("content")
        elif name == "memory" and field.message_type is not None and top:
            getattr(message, name).content = _TEXT_FIELDS["content"]
        elif (
            name == "messages"
            and field.is_repeated
            and "session_id" in (f.name for f in message.DESCRIPTOR.fields)
        ):
            getattr(message, name).add(role=2, content="hello")  # ROLE_USER
        elif (
            top
            and field.message_type is not None
            and not field.is_repeated
            and "session_id" in field.message_type.fields_by_name
        ):
            named = _fill(getattr(message, name), ids, query, top=False) or named
    return named
