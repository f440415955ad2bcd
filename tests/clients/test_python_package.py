"""The SDK's wheel, built as `pip install ./clients/python` builds it: whole, typed, alone.

Built from a copy of clients/python so that no build files land in the checkout.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser

import pytest

from tests.support.paths import ROOT

SDK = ROOT / "clients" / "python"
PACKAGE = SDK / "src" / "contextd_client"
DEPENDENCIES = {"grpcio", "grpcio-status", "googleapis-common-protos", "protobuf"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    work = tmp_path_factory.mktemp("sdk-wheel")
    source = work / "src"
    shutil.copytree(
        SDK, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    )
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(work), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    (built,) = work.glob("contextd_client-*.whl")
    return zipfile.ZipFile(built)


def test_the_wheel_ships_every_module_and_py_typed(wheel: zipfile.ZipFile) -> None:
    shipped = set(wheel.namelist())
    sources = {
        f"contextd_client/{path.relative_to(PACKAGE).as_posix()}"
        for path in PACKAGE.rglob("*")
        if path.suffix in (".py", ".pyi") and "__pycache__" not in path.parts
    }
    assert "contextd_client/py.typed" in shipped
    assert "contextd_client/_pb/context_pb2.pyi" in sources
    assert sources - shipped == set()


def test_the_wheel_depends_only_on_grpc_and_protobuf(wheel: zipfile.ZipFile) -> None:
    (metadata_name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    metadata = Parser().parsestr(wheel.read(metadata_name).decode())
    requires = {
        re.split(r"[<>=!~ ;\[]", r, maxsplit=1)[0] for r in metadata.get_all("Requires-Dist")
    }
    assert requires == DEPENDENCIES
    assert "Typing :: Typed" in (metadata.get_all("Classifier") or [])


def test_the_sdk_never_imports_the_server(wheel: zipfile.ZipFile) -> None:
    server_import = re.compile(r"^\s*(from|import)\s+contextd(\.|\s|$)", re.MULTILINE)
    offenders = [
        name
        for name in wheel.namelist()
        if name.endswith(".py") and server_import.search(wheel.read(name).decode())
    ]
    assert offenders == []
