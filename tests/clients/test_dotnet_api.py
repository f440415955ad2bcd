"""Checks of the .NET client's use of its packages, against the list of their API.

clients/dotnet/api/external-api.json lists each type and member of Grpc.Core.Api,
Grpc.Net.Client, Grpc.Net.Client.Web, Grpc.StatusProto (with the Google.Api.CommonProtos
types it brings) and Google.Protobuf that the library, the VB sample and the README's VB
snippets use, with the signature read from the package's source at the pinned version's
commit. This is a check of names, not a C# compiler: see the first test's docstring.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from tests.support.dotnet_api import declared_names, find_problems, load_api
from tests.support.dotnet_generated import (
    DOTNET,
    LIBRARY,
    SAMPLE,
    GeneratedCSharp,
    generate_csharp,
    rpcs,
    vb_code,
)
from tests.support.dotnet_source import tokenize


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> GeneratedCSharp:
    return generate_csharp(tmp_path_factory.mktemp("csharp"))


EXTERNAL_API = DOTNET / "api" / "external-api.json"
# Types the code reaches through a member without naming them (IAsyncStreamReader...).
_REACHED_ONLY = {"class", "interface", "struct", "delegate", "static class"}


def _known_names(generated: GeneratedCSharp) -> set[str]:
    """The project's own names: declared in its C# and VB, and generated from the protos."""
    # GetSsoTokenAsync: a README snippet's stand-in for the add-in's own token function.
    names = {"GetSsoTokenAsync"} | {f"{r.name}Async" for r in rpcs()} | {r.name for r in rpcs()}
    names |= {rpc.service for rpc in rpcs()} | {f"{rpc.service}Client" for rpc in rpcs()}
    names |= set(generated.properties) | set(generated.enums)
    for values in (*generated.properties.values(), *generated.enums.values()):
        names |= values
    for path in (*LIBRARY.glob("*.cs"), SAMPLE):
        names |= declared_names(
            tokenize(path.read_text(), vb=path.suffix == ".vb"), vb=path.suffix == ".vb"
        )
    return names


def _dotnet_code() -> dict[str, tuple[str, bool]]:
    code = {p.name: (p.read_text(), False) for p in sorted(LIBRARY.glob("*.cs"))}
    return code | {name: (text, True) for name, text in vb_code().items()}


@pytest.mark.parametrize("name", list(_dotnet_code()))
def test_code_uses_only_listed_api_of_its_packages(generated: GeneratedCSharp, name: str) -> None:
    """Names, not a compiler: what this sees and what it cannot.

    The code is tokenized with comments and string contents removed (the code inside
    interpolated strings kept). Every `using` / `Imports` namespace must be the project's, a
    listed base-library one, or hold a listed package type. Every dotted chain is followed:
    namespaces, then a type (qualified, or simple through the imported namespaces, or the
    declared type of a local or parameter), then each member must be listed for that type,
    its base, or as an extension method of it from an imported namespace, and the chain goes
    on with the listed member's return type; a member only under `#if` must be used under
    the same `#if`. Where the type is not known (a lambda's parameter, a `var` from a call),
    each member name must at least be a listed member, the project's own, or a listed
    base-library name. Not checked: overloads and argument types, generic constraints,
    nullability, base-library members beyond their names, crefs in doc comments. Only
    `dotnet build` checks those.
    """
    api = load_api(EXTERNAL_API)
    text, vb = _dotnet_code()[name]
    problems, _ = find_problems(text, vb=vb, api=api, known=_known_names(generated))
    assert not problems, f"{name}:\n" + "\n".join(problems)


def _problems(source: str, generated: GeneratedCSharp, *, vb: bool = False) -> list[str]:
    known = _known_names(generated) | declared_names(tokenize(source, vb=vb), vb=vb)
    return find_problems(source, vb=vb, api=load_api(EXTERNAL_API), known=known)[0]


def test_api_check_reports_what_the_packages_lack(generated: GeneratedCSharp) -> None:
    old = "using Google.Rpc;\nusing Grpc.Core;\nusing Grpc.StatusProto;\n" + (
        "class A { void F(RpcException error) { var s = error.GetRpcStatus(); "
        "var b = s?.GetStatusDetail<BadRequest>(); } }"
    )
    assert _problems(old, generated) == [
        "line 3: namespace Grpc.StatusProto is in no listed package",
        "line 4: Google.Rpc.Status has no listed member GetStatusDetail",
    ]
    cases = {
        "GrpcChannel.ForAdress(url, o);": "GrpcChannel has no listed member ForAdress",
        "var o = new GrpcChannelOptions(); o.HttpHandlr = h;": "GrpcChannelOptions has no listed",
        "o.HttpVersionPolicy = p;": "HttpVersionPolicy exists only under #if NET5_0_OR_GREATER",
        "var c = StatusCode.InvalidArgumnt;": "Grpc.Core.StatusCode has no listed member Invalid",
        "x = GrpcWebMode.GrpcWebTxt;": "no listed or project member GrpcWebTxt",
    }
    for code, problem in cases.items():
        method = f"void F(GrpcChannelOptions o) {{ {code} }}"
        source = f"using Grpc.Core;\nusing Grpc.Net.Client;\nclass A {{ {method} }}"
        found = _problems(source, generated)
        assert len(found) == 1 and problem in found[0], (code, found)
    # An extension method counts only with its namespace imported.
    qualified = "class A { void F(Grpc.Core.RpcException e) { e.GetRpcStatus(); } }"
    assert _problems(qualified, generated) == [
        "line 1: Grpc.Core.RpcException has no listed member GetRpcStatus"
    ]


def test_api_check_reads_code_not_comments_or_strings(generated: GeneratedCSharp) -> None:
    source = 'using Grpc.Core;\n// GetStatusDetail\nclass A { string s = "x.Bogus"; /* Y.Bogus */ }'
    assert _problems(source, generated) == []
    hole = 'using Grpc.Core;\nclass A { string F(Status s) => $"{s.Detial}: {{s.Bogus}}"; }'
    assert _problems(hole, generated) == ["line 2: Grpc.Core.Status has no listed member Detial"]
    vb = "\n".join(
        [
            "Imports Grpc.Core",
            "' x.Bogus",
            "Module M",
            '  Dim s = "y.Bogus" & $"{StatusCode.Bogus}"',
        ]
    )
    assert _problems(vb, generated, vb=True) == [
        "line 4: Grpc.Core.StatusCode has no listed member Bogus"
    ]


def test_api_list_matches_the_pinned_packages_and_names_its_sources() -> None:
    data = json.loads(EXTERNAL_API.read_text())
    project = ET.parse(LIBRARY / "Contextd.Client.csproj").getroot()
    pinned = {r.attrib["Include"]: r.attrib["Version"] for r in project.iter("PackageReference")}
    for name, package in data["packages"].items():
        assert name in pinned or package.get("brought_by"), name
        assert package["version"] == pinned.get(name, package["version"]), name
    code = {t.text for text, vb in _dotnet_code().values() for t in tokenize(text, vb=vb)}
    for entry in data["members"]:
        package = data["packages"][entry["package"]]
        assert entry["version"] == package["version"]
        assert entry["source"].startswith(f"{package['repository']}/blob/{package['commit']}/")
        # No stale entries: each listed type and member is named by the code.
        name = entry["member"] if entry["member"] not in {None, ".ctor"} else entry["type"]
        assert name.rsplit(".", 1)[-1] in code or entry["kind"] in _REACHED_ONLY, entry
