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
