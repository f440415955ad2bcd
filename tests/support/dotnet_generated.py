"""The .NET client's inputs shared by its tests: the protos' RPCs, what protoc's C# generator
makes of them, and the VB code (the sample and the README's snippets)."""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import grpc_tools
import pytest
from google.protobuf.descriptor import FileDescriptor

from tests.support.paths import ROOT

PROTO_ROOT = ROOT / "protos"
PROTO_DIR = PROTO_ROOT / "contextd" / "v1"
DOTNET = ROOT / "clients" / "dotnet"
LIBRARY = DOTNET / "src" / "Contextd.Client"
WRAPPER = LIBRARY / "ContextdClient.cs"
SAMPLE = DOTNET / "samples" / "Contextd.Sample.VB" / "Program.vb"
README = LIBRARY / "README.md"
REQUIRED_PACKAGES = {
    "Google.Protobuf",
    "Grpc.Net.Client",
    "Grpc.Net.Client.Web",
    "Grpc.StatusProto",
    "Grpc.Tools",
    "Microsoft.Extensions.AI.Abstractions",
}


@dataclass(frozen=True)
class Rpc:
    service: str
    name: str
    request: str
    response: str
    server_streaming: bool


@dataclass
class GeneratedCSharp:
    """Names protoc's C# generator produced: message classes, their properties, enums."""

    files: dict[str, str] = field(default_factory=dict)
    properties: dict[str, set[str]] = field(default_factory=dict)
    enums: dict[str, set[str]] = field(default_factory=dict)


def proto_files() -> list[Path]:
    return sorted(PROTO_DIR.glob("*.proto"))


def file_descriptors() -> list[FileDescriptor]:
    # The server's generated modules; test_contract keeps them identical to protos/.
    return [
        importlib.import_module(f"contextd.v1.{proto.stem}_pb2").DESCRIPTOR
        for proto in proto_files()
    ]


def rpcs() -> list[Rpc]:
    return [
        Rpc(
            service.name,
            method.name,
            method.input_type.name,
            method.output_type.name,
            method.server_streaming,
        )
        for descriptor in file_descriptors()
        for service in descriptor.services_by_name.values()
        for method in service.methods
    ]


def csharp_file_name(proto: Path) -> str:
    """protoc's C# output name: the proto's base name in PascalCase."""
    return "".join(part[:1].upper() + part[1:] for part in proto.stem.split("_")) + ".cs"


def protoc() -> str:
    protoc = shutil.which("protoc")
    if protoc is None:
        message = "protoc (Debian package protobuf-compiler) is not installed"
        if os.environ.get("CI"):
            pytest.fail(message + "; .ci/run installs it")
        pytest.skip(message)
    return protoc


def message_properties(text: str) -> dict[str, set[str]]:
    starts = list(re.finditer(r"public sealed partial class (\w+) : pb::IMessage<\1>", text))
    found: dict[str, set[str]] = {}
    for i, start in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        body = text[start.end() : end]
        found[start.group(1)] = set(
            re.findall(
                r"^\s*public (?!static |const |sealed |enum )[\w.:<>, ]+ (\w+) \{$", body, re.M
            )
        )
    return found


def enums(text: str) -> dict[str, set[str]]:
    return {
        match.group(1): set(re.findall(r"(\w+) = -?\d+", match.group(2)))
        for match in re.finditer(r"public enum (\w+) \{$(.*?)^\s*\}$", text, re.S | re.M)
    }


def generate_csharp(out: Path) -> GeneratedCSharp:
    """Runs protoc's C# generator over every proto into out; the names it generated."""
    well_known = Path(grpc_tools.__file__).parent / "_proto"
    result = subprocess.run(
        [
            protoc(),
            f"-I{PROTO_ROOT}",
            f"-I{well_known}",
            f"--csharp_out={out}",
            *[str(proto.relative_to(PROTO_ROOT)) for proto in proto_files()],
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    code = GeneratedCSharp()
    for path in sorted(out.iterdir()):
        text = path.read_text()
        code.files[path.name] = text
        code.properties.update(message_properties(text))
        code.enums.update(enums(text))
    return code


def vb_code() -> dict[str, str]:
    """The VB sample and every VB snippet of the README, by name."""
    code = {SAMPLE.name: SAMPLE.read_text()}
    snippets = re.findall(r"^```vb\n(.*?)^```$", README.read_text(), re.M | re.S)
    assert len(snippets) >= 8, "the README shows VB per main call"
    for i, snippet in enumerate(snippets):
        code[f"README snippet {i + 1}"] = snippet
    return code
