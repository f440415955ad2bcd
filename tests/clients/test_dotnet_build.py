"""The .NET client built and tested with the .NET SDK, where `dotnet` is on PATH.

Every project of clients/dotnet is built with warnings as errors and the restore locked to
the lock files: the library for netstandard2.0 and net10.0, the VB sample for net48 and
net10.0, the C# tests. The C# tests (xunit) then run against live contextd servers that
their fixtures start from this venv, the VB sample among them. Last, the library is packed
and a fresh consumer project, outside the repository's build settings, restores the package
from a folder feed, builds for net10.0 and net48, and runs against a live server.
Without `dotnet` these tests skip and say so; tests/clients/test_dotnet.py runs anyway.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.dotnet_generated import README
from tests.support.dotnet_sdk import (
    CONFIGURATION,
    DOTNET_DIR,
    LIBRARY_PROJECT,
    SOLUTION,
    TEST_PROJECT,
    Run,
    read_trx,
    run,
)
from tests.support.server import ServerProcess, start_server

# The venv's contextd, for the C# tests' fixtures.
CONTEXTD = Path(sys.executable).parent / "contextd"
VERSION = re.search(r"<Version>([^<]+)</Version>", LIBRARY_PROJECT.read_text())
PACKAGE_VERSION = VERSION.group(1) if VERSION else ""


@pytest.fixture(scope="module")
def build() -> Run:
    result = run(
        [
            "build",
            str(SOLUTION),
            "-c",
            CONFIGURATION,
            "-warnaserror",
            "-p:RestoreLockedMode=true",
        ]
    )
    assert result.returncode == 0, result.explain()
    return result


def test_every_project_builds_for_every_target_without_warnings(build: Run) -> None:
    assert re.search(r"^\s*0 Warning\(s\)$", build.output, re.M), build.explain()
    built = {
        (Path(path).name, Path(path).parent.name)
        for path in re.findall(r"-> (\S+\.(?:dll|exe))$", build.output, re.M)
    }
    assert built >= {
        ("Contextd.Client.dll", "netstandard2.0"),
        ("Contextd.Client.dll", "net10.0"),
        ("Contextd.Sample.VB.dll", "net10.0"),
        ("Contextd.Sample.VB.exe", "net48"),
        ("Contextd.Client.Tests.dll", "net10.0"),
        ("Contextd.Client.Framework.exe", "net48"),
    }, build.explain()


def test_the_net48_build_gets_its_binding_redirects(build: Run) -> None:
    """What the README tells a .NET Framework add-in: the build writes the redirects."""
    config = DOTNET_DIR / "samples" / "Contextd.Sample.VB" / "bin" / CONFIGURATION / "net48"
    text = (config / "Contextd.Sample.VB.exe.config").read_text()
    redirected = set(re.findall(r'<assemblyIdentity name="([\w.]+)"', text))
    assert redirected >= {"Microsoft.Bcl.AsyncInterfaces", "System.Memory", "System.Text.Json"}
    assert (config / "Contextd.Client.dll").is_file()


def test_csharp_and_vb_tests_pass_against_a_live_contextd(build: Run, tmp_path: Path) -> None:
    assert CONTEXTD.is_file(), f"{CONTEXTD} is missing: the venv is not installed"
    results = tmp_path / "results"
    result = run(
        [
            "test",
            str(TEST_PROJECT),
            "-c",
            CONFIGURATION,
            "--no-build",
            "--logger",
            "trx;LogFileName=tests.trx",
            "--results-directory",
            str(results),
        ],
        env={"CONTEXTD_BIN": str(CONTEXTD)},
    )
    trx = results / "tests.trx"
    assert trx.is_file(), result.explain()
    report = read_trx(trx)
    counters = report.counters
    assert counters["failed"] == 0 and result.returncode == 0, report.failures() or result.explain()
    assert counters["total"] == counters["passed"] == counters["executed"], counters
    # Every service over each transport, the chat client, the reducer, credentials, TLS and
    # the VB sample: a run with far fewer tests lost some of them.
    assert counters["passed"] >= 80, counters
    names = {r.name for r in report.results}
    assert any(n.startswith("Contextd.Client.Tests.VbSampleTests.") for n in names), names


# What the README's VB snippets take from around them: the add-in's own variables.
SNIPPET_CONTEXT = {
    "client": "ContextdClient",
    "sessionId": "String",
    "request": "BuildMessagesRequest",
    "completed": "TurnCompleted",
    "answerBox": "AnswerBox",
    "cancelButtonToken": "CancellationToken",
    "chartPng": "String",
    "history": "List(Of ChatMessage)",
}

SNIPPETS_PROJECT = """<Project Sdk="Microsoft.NET.Sdk">
  <PropertyGroup>
    <TargetFramework>net10.0</TargetFramework>
    <OptionStrict>On</OptionStrict>
    <OptionExplicit>On</OptionExplicit>
    <OptionInfer>On</OptionInfer>
    <TreatWarningsAsErrors>true</TreatWarningsAsErrors>
  </PropertyGroup>
  <ItemGroup>
    <ProjectReference Include="{library}" />
  </ItemGroup>
</Project>
"""

SNIPPETS_HEADER = """Imports System.Threading
Imports Contextd.Client
Imports Contextd.V1
Imports Grpc.Net.Client.Web
Imports Microsoft.Extensions.AI
{imports}

' Stands for a task pane's text box.
Public Class AnswerBox
    Public Sub AppendText(text As String)
    End Sub
End Class

Public Module Snippets
    ' Stands for the add-in's own token function.
    Function GetSsoTokenAsync(cancel As CancellationToken) As Task(Of String)
        Return Task.FromResult("token")
    End Function
"""


def _snippet_function(index: int, code: str) -> str:
    """One README snippet as a function whose parameters are the variables it uses from
    around it."""
    declared = set(re.findall(r"^\s*(?:Dim|Using)\s+(\w+)", code, re.M))
    parameters = ", ".join(
        f"{name} As {kind}"
        for name, kind in SNIPPET_CONTEXT.items()
        if name not in declared and re.search(rf"\b{name}\b", code)
    )
    kind = "Async Function" if "Await " in code else "Sub"
    end = "End Function" if kind == "Async Function" else "End Sub"
    returns = " As Task" if kind == "Async Function" else ""
    body = "\n".join("        " + line for line in code.splitlines())
    return f"    {kind} Snippet{index}({parameters}){returns}\n{body}\n    {end}\n"


def test_the_readmes_vb_snippets_compile(build: Run, tmp_path: Path) -> None:
    """With Option Strict, each snippet as the body of a function of its own."""
    snippets = re.findall(r"^```vb\n(.*?)^```$", README.read_text(), re.M | re.S)
    assert len(snippets) >= 10
    imports: set[str] = set()
    functions = []
    for i, snippet in enumerate(snippets, 1):
        lines = snippet.splitlines()
        imports |= {line for line in lines if line.startswith("Imports ")}
        code = "\n".join(line for line in lines if not line.startswith("Imports "))
        functions.append(_snippet_function(i, code))
    project = tmp_path / "snippets"
    project.mkdir()
    (project / "Snippets.vbproj").write_text(SNIPPETS_PROJECT.format(library=LIBRARY_PROJECT))
    imports -= set(SNIPPETS_HEADER.splitlines())
    source = SNIPPETS_HEADER.format(imports="\n".join(sorted(imports)))
    (project / "Snippets.vb").write_text(source + "\n".join(functions) + "End Module\n")
    result = run(["build", "-c", CONFIGURATION], cwd=project)
    assert result.returncode == 0, result.explain() + "\n" + (project / "Snippets.vb").read_text()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = start_server(tmp_path_factory.mktemp("dotnet-consumer"))
    yield proc
    assert proc.stop() == 0


@pytest.fixture(scope="module")
def package(build: Run, tmp_path_factory: pytest.TempPathFactory) -> Path:
    feed = tmp_path_factory.mktemp("feed")
    result = run(["pack", str(LIBRARY_PROJECT), "-c", CONFIGURATION, "--no-build", "-o", str(feed)])
    assert result.returncode == 0, result.explain()
    return feed / f"Contextd.Client.{PACKAGE_VERSION}.nupkg"


def test_the_package_carries_both_targets_docs_readme_and_sources(package: Path) -> None:
    with zipfile.ZipFile(package) as nupkg:
        names = set(nupkg.namelist())
        nuspec = nupkg.read("Contextd.Client.nuspec").decode("utf-8-sig")
        dlls = {
            f: nupkg.read(f"lib/{f}/Contextd.Client.dll") for f in ("netstandard2.0", "net10.0")
        }
    for framework in ("netstandard2.0", "net10.0"):
        assert f"lib/{framework}/Contextd.Client.xml" in names
    assert "README.md" in names and "<readme>README.md</readme>" in nuspec
    for framework, dll in dlls.items():
        # The PDB is embedded ("MPDB" blob) with the sources in it.
        assert b"MPDB" in dll, f"{framework}: no embedded PDB"
    # The runtime dependencies, and not the build-time code generator.
    for dependency in (
        "Grpc.Net.Client",
        "Grpc.Net.Client.Web",
        "Grpc.StatusProto",
        "Google.Protobuf",
    ):
        assert f'id="{dependency}"' in nuspec, dependency
    assert 'id="Microsoft.Extensions.AI.Abstractions"' in nuspec
    assert "Grpc.Tools" not in nuspec


def test_the_package_says_where_its_sources_are_and_embeds_no_local_path(package: Path) -> None:
    with zipfile.ZipFile(package) as nupkg:
        nuspec = nupkg.read("Contextd.Client.nuspec").decode("utf-8-sig")
        readme = nupkg.read("README.md").decode()
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=DOTNET_DIR, check=True
    ).stdout.strip()
    assert re.search(rf'<repository type="git"[^>]* commit="{commit}"', nuspec), nuspec
    origin = subprocess.run(
        ["git", "remote", "get-url", "origin"], capture_output=True, text=True, cwd=DOTNET_DIR
    )
    if origin.returncode == 0 and re.match(
        r"(https?|ssh)://|[^/@]+@[^/:]+:", origin.stdout.strip()
    ):
        # A clone of a hosted repository: the package links the repository and its page
        # (an origin that is a folder on this machine gives Source Link no URL).
        repository = re.search(r'<repository type="git" url="([^"]+)"', nuspec)
        assert repository, nuspec
        url = repository.group(1).removesuffix(".git")
        assert f"<projectUrl>{url}</projectUrl>" in nuspec, nuspec
    # The embedded PDB's source paths (/_/...) and Source Link: BuildTests in the C# tests.
    # The users' README: no link that only works inside the repository.
    assert "Install" in readme and "dotnet add package Contextd.Client" in readme
    assert not re.search(r"\]\((?!https?://|#)", readme), "a relative link in the package README"


CONSUMER_PROJECT = """<Project Sdk="Microsoft.NET.Sdk">
  <PropertyGroup>
    <OutputType>Exe</OutputType>
    <TargetFrameworks>net10.0;net48</TargetFrameworks>
    <LangVersion>latest</LangVersion>
    <Nullable>enable</Nullable>
    <TreatWarningsAsErrors>true</TreatWarningsAsErrors>
  </PropertyGroup>
  <ItemGroup>
    <PackageReference Include="Contextd.Client" Version="{version}" />
  </ItemGroup>
</Project>
"""

CONSUMER_PROGRAM = """using System;
using System.Threading.Tasks;
using Contextd.Client;
using Contextd.V1;
using Microsoft.Extensions.AI;

internal static class Program
{
    private static async Task<int> Main(string[] args)
    {
        using var client = new ContextdClient(args[0]);
        var counting = new CountTokensRequest { Tokenizer = "cl100k_base" };
        counting.Texts.Add("hello");
        var counted = await client.CountTokensAsync(counting);
        Console.WriteLine("tokens: " + counted.TotalTokens);
        var options = new ContextdChatClientOptions { UserId = "consumer" };
        IChatClient chat = new ContextdChatClient(client, options);
        var response = await chat.GetResponseAsync("Hello from a package");
        Console.WriteLine("answer: " + response.Text);
        return 0;
    }
}
"""

# Contextd.Client only from the folder feed, every other package from the machine's own
# sources, as a host's restore would.
CONSUMER_NUGET_CONFIG = """<?xml version="1.0" encoding="utf-8"?>
<configuration>
  <packageSources>
    <clear />
    <add key="feed" value="{feed}" />
{sources}
  </packageSources>
  <packageSourceMapping>
    <packageSource key="feed"><package pattern="Contextd.Client" /></packageSource>
{mappings}
  </packageSourceMapping>
</configuration>
"""


def _consumer_nuget_config(feed: Path) -> str:
    listed = run(["nuget", "list", "source", "--format", "Short"])
    assert listed.returncode == 0, listed.explain()
    urls = [line.split(None, 1)[1] for line in listed.output.splitlines() if line.startswith("E ")]
    assert urls, f"no enabled package source: {listed.output}"
    sources = "\n".join(f'    <add key="source{i}" value="{url}" />' for i, url in enumerate(urls))
    mappings = "\n".join(
        f'    <packageSource key="source{i}"><package pattern="*" /></packageSource>'
        for i in range(len(urls))
    )
    return CONSUMER_NUGET_CONFIG.format(feed=feed, sources=sources, mappings=mappings)


def test_a_fresh_project_restores_the_package_from_a_folder_and_runs(
    package: Path, server: ServerProcess, tmp_path: Path
) -> None:
    # Outside clients/dotnet, as a host's project is: none of its Directory.*.props apply.
    assert DOTNET_DIR.resolve() not in tmp_path.resolve().parents
    consumer = tmp_path / "consumer"
    consumer.mkdir()
    (consumer / "Consumer.csproj").write_text(CONSUMER_PROJECT.format(version=PACKAGE_VERSION))
    (consumer / "Program.cs").write_text(CONSUMER_PROGRAM)
    (consumer / "nuget.config").write_text(_consumer_nuget_config(package.parent))
    # A package folder of its own, so that the package comes from the feed and not from a
    # copy an earlier run left in the machine's package cache.
    env = {"NUGET_PACKAGES": str(tmp_path / "packages")}

    built = run(["build", "-c", "Release"], cwd=consumer, env=env)
    assert built.returncode == 0, built.explain()
    restored = tmp_path / "packages" / "contextd.client" / PACKAGE_VERSION
    assert (restored / f"contextd.client.{PACKAGE_VERSION}.nupkg").is_file(), built.explain()
    assert (consumer / "bin" / "Release" / "net48" / "Consumer.exe").is_file(), built.explain()

    ran = run(
        ["run", "--no-build", "-c", "Release", "-f", "net10.0", "--", server.address],
        cwd=consumer,
        env=env,
    )
    assert ran.returncode == 0, ran.explain()
    assert re.search(r"^tokens: 1$", ran.output, re.M), ran.explain()
    assert re.search(r"^answer: echo: .*Hello from a package", ran.output, re.M), ran.explain()


# .NET Framework 4.8 under Mono: mono-runtime and System.Net.Http from Debian, with the
# reference facades (netstandard.dll among them) that only Debian's large mono-devel ships;
# .ci/run installs the first two and copies the facades out of mono-devel's package.
MONO_FACADES = Path("/usr/lib/mono/4.5/Facades")
FRAMEWORK_PROGRAM = (
    DOTNET_DIR / "tests" / "Contextd.Client.Framework" / "bin" / CONFIGURATION / "net48"
) / "Contextd.Client.Framework.exe"


def test_a_net48_program_runs_under_mono_over_grpc_web(
    build: Run, tmp_path_factory: pytest.TempPathFactory
) -> None:
    mono = shutil.which("mono")
    if mono is None or not (MONO_FACADES / "netstandard.dll").is_file():
        reason = f"Mono with its facades ({MONO_FACADES}/netstandard.dll) is not installed"
        if os.environ.get("CI") == "true":
            pytest.fail(reason + "; .ci/run installs it")
        pytest.skip(reason + " (.ci/run installs it)")
    # Echo chunks 20 ms apart, so that the cancelled turn is cancelled midway.
    server = start_server(
        tmp_path_factory.mktemp("mono"), "--web-port", "0", "--echo-delay-ms", "20"
    )
    try:
        web = str(server.logs("grpc-web listening")[0]["address"])
        ran = subprocess.run(
            [mono, str(FRAMEWORK_PROGRAM), web],
            capture_output=True,
            text=True,
            timeout=180,
            env={**os.environ, "MONO_PATH": str(MONO_FACADES)},
        )
    finally:
        assert server.stop() == 0
    output = ran.stdout + ran.stderr
    assert ran.returncode == 0, output
    assert re.search(r"^runtime: 4\.0\.30319\.\d+ \(Mono\)$", output, re.M), output
    assert re.search(r"^session: \w+$", output, re.M), output
    assert re.search(r"^turn: Ok after [1-9]\d* deltas$", output, re.M), output
    assert re.search(r"^built: [1-9]\d* messages$", output, re.M), output
    assert re.search(r"^cancelled: after 1 delta$", output, re.M), output
    assert re.search(r"^error: NotFound$", output, re.M), output
