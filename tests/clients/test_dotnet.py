"""Checks of the .NET client (clients/dotnet) that need no .NET SDK, so they run everywhere.

The compiler and the tests against a live server are in test_dotnet_build.py, where `dotnet`
is on PATH. These check what holds with or without it: protoc's own C# generator accepts
every proto (the code Grpc.Tools generates at build time), the project files point at the
repository's protos and pin every package, the wrapper has a method per RPC and the README
lists them all, and the README's VB snippets, which no compiler sees, use only names that
exist (as does the VB sample, which the compiler checks where there is one).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.dotnet_generated import (
    DOTNET,
    LIBRARY,
    PROTO_ROOT,
    README,
    REQUIRED_PACKAGES,
    SAMPLE,
    WRAPPER,
    GeneratedCSharp,
    csharp_file_name,
    file_descriptors,
    generate_csharp,
    proto_files,
    rpcs,
    vb_code,
)


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> GeneratedCSharp:
    return generate_csharp(tmp_path_factory.mktemp("csharp"))


# (1) protoc's C# generator accepts every proto, one file each, in the csharp_namespace.


def test_protoc_generates_one_csharp_file_per_proto_in_its_namespace(
    generated: GeneratedCSharp,
) -> None:
    descriptors = {d.name.rsplit("/", 1)[-1]: d for d in file_descriptors()}
    assert set(generated.files) == {csharp_file_name(p) for p in proto_files()}
    for proto in proto_files():
        descriptor = descriptors[proto.name]
        namespace = descriptor.GetOptions().csharp_namespace
        assert namespace == "Contextd.V1", f"{proto.name} lacks option csharp_namespace"
        text = generated.files[csharp_file_name(proto)]
        assert re.search(rf"^namespace {re.escape(namespace)} \{{$", text, re.M), proto.name
        for message in descriptor.message_types_by_name:
            assert message in generated.properties, f"{message} of {proto.name} not generated"


def test_wrapper_imports_the_generated_namespace() -> None:
    namespaces = {d.GetOptions().csharp_namespace for d in file_descriptors()}
    source = WRAPPER.read_text()
    for namespace in namespaces:
        assert re.search(rf"^using {re.escape(namespace)};$", source, re.M)


def _library_properties() -> dict[str, set[str]]:
    """The settable properties of the library's own classes (the options), by class."""
    found: dict[str, set[str]] = {}
    for path in LIBRARY.glob("*.cs"):
        source = path.read_text()
        starts = list(re.finditer(r"public sealed class (\w+)", source))
        for i, start in enumerate(starts):
            end = starts[i + 1].start() if i + 1 < len(starts) else len(source)
            body = source[start.end() : end]
            found[start.group(1)] = set(re.findall(r"public [\w.<>?, ]+ (\w+) \{ get; set;", body))
    return found


# Microsoft.Extensions.AI's ChatOptions, as far as the VB code sets it.
CHAT_OPTIONS = {
    "ConversationId",
    "Instructions",
    "ModelId",
    "Temperature",
    "MaxOutputTokens",
    "Tools",
}


@pytest.mark.parametrize("name", list(vb_code()))
def test_vb_code_uses_only_generated_types_properties_and_enum_members(
    generated: GeneratedCSharp, name: str
) -> None:
    vb = vb_code()[name]
    types = {**generated.properties, **_library_properties(), "ChatOptions": CHAT_OPTIONS}
    # New X With { .A = ..., .B = New Y With { ... } }: every X and each of its .A exists.
    for match in re.finditer(r"New (\w+) With \{", vb):
        type_name = match.group(1)
        assert type_name in types, f"{type_name} is neither a generated message nor an option"
        for field_name in _initializer_fields(vb, match.end()):
            assert field_name in types[type_name], f"{type_name} has no {field_name}"
    for type_name in re.findall(r"New (\w+(?:Request|Response))\(\)", vb):
        assert type_name in types, f"{type_name} is not a generated message"
    # Enum members, the oneof case included: TurnStatus.[Error], EventOneofCase.TextDelta.
    for enum, member in re.findall(r"(?=\b(\w+)\.\[?(\w+)\]?)", vb):
        if enum in generated.enums:
            assert member in generated.enums[enum], f"{enum} has no member {member}"


def test_vb_code_checks_see_the_sample_requests(generated: GeneratedCSharp) -> None:
    sample = SAMPLE.read_text()
    initializers = re.findall(r"New (\w+) With \{", sample)
    assert set(initializers) >= {
        "CreateSessionRequest",
        "SessionContext",
        "BuildMessagesRequest",
        "StreamChatRequest",
        "CollectRequest",
    }
    enums = [e for e, _ in re.findall(r"(?=\b(\w+)\.\[?(\w+)\]?)", sample) if e in generated.enums]
    assert {"EventOneofCase", "TurnStatus", "OutputFormat"} <= set(enums)


# Members of .NET, the gRPC packages and Microsoft.Extensions.AI the VB code uses besides
# contextd's own names.
BCL_MEMBERS = {
    "Add",  # RepeatedField / MapField
    "AppendText",
    "Cancel",
    "CancelKeyPress",
    "Core",
    "ConversationId",  # Microsoft.Extensions.AI: ChatResponse, ChatOptions
    "CopyFrom",  # Google.Protobuf.ByteString
    "Count",
    "Error",
    "FinishReason",  # ChatResponse
    "FromMinutes",
    "FromSeconds",
    "GetAwaiter",
    "GetEnvironmentVariable",
    "GetResult",
    "GrpcWebText",
    "InputTokenCount",  # UsageDetails
    "InvalidArgument",
    "IsNullOrEmpty",
    "Join",
    "OutputTokenCount",  # UsageDetails
    "ReadAllBytes",  # System.IO.File
    "Select",
    "StatusCode",
    "Token",
    "Write",
    "WriteLine",
}


@pytest.mark.parametrize("name", list(vb_code()))
def test_vb_code_reads_only_members_that_exist(generated: GeneratedCSharp, name: str) -> None:
    """A misspelt response property (`.TotalToken`) is caught here, not only by a compiler."""
    library = "\n".join(p.read_text() for p in LIBRARY.glob("*.cs"))
    known = (
        BCL_MEMBERS
        | set(re.findall(r"public [\w.<>?, ]+ (\w+)\b", library))
        | {member for members in generated.properties.values() for member in members}
        | {member for members in generated.enums.values() for member in members}
        | set(generated.properties)
        | set(generated.enums)
    )
    code = [line for line in vb_code()[name].splitlines() if not line.startswith("Imports ")]
    # Comments go; a quote inside a string literal is not a comment.
    text = "\n".join(re.sub(r"(^|\s)'[^\"]*$", "", line) for line in code)
    used = set(re.findall(r"\.\[?([A-Z]\w*)", text))
    assert used, name
    assert used <= known, f"{name} uses unknown members {sorted(used - known)}"


def _initializer_fields(source: str, start: int) -> list[str]:
    """The `.Name =` assignments at the top level of a VB `With { ... }` block."""
    depth, names, i = 1, [], start
    while depth:
        char = source[i]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        elif depth == 1 and char == ".":
            member = re.match(r"\.(\w+)\s*=", source[i:])
            if member and not source[i - 1].isalnum():
                names.append(member.group(1))
        i += 1
    return names


# (2) The project files are well formed and point at what exists in the repository.


def _project_files() -> list[Path]:
    return sorted(
        p
        for ext in ("*.csproj", "*.vbproj", "*.props")
        for p in DOTNET.rglob(ext)
        if not {"bin", "obj"} & set(p.relative_to(DOTNET).parts)
    )


def test_every_project_file_is_well_formed_xml() -> None:
    files = _project_files()
    assert {p.name for p in files} >= {"Contextd.Client.csproj", "Contextd.Sample.VB.vbproj"}
    for path in files:
        root = ET.parse(path).getroot()
        assert root.tag == "Project", path
        for reference in root.iter("ProjectReference"):
            target = (path.parent / reference.attrib["Include"]).resolve()
            assert target.is_file(), f"{path.name} references missing {target}"


def test_library_generates_stubs_from_the_repository_protos() -> None:
    project = ET.parse(LIBRARY / "Contextd.Client.csproj").getroot()
    items = list(project.iter("Protobuf"))
    assert items, "no <Protobuf> item: Grpc.Tools would generate nothing"
    covered: set[Path] = set()
    for item in items:
        assert item.attrib.get("GrpcServices") == "Client"
        assert (LIBRARY / item.attrib["ProtoRoot"]).resolve() == PROTO_ROOT
        covered |= {p.resolve() for p in LIBRARY.glob(item.attrib["Include"])}
    assert covered == {p.resolve() for p in proto_files()}


def _package_versions() -> dict[str, str]:
    props = ET.parse(DOTNET / "Directory.Packages.props").getroot()
    assert props.findtext("PropertyGroup/ManagePackageVersionsCentrally") == "true"
    return {v.attrib["Include"]: v.attrib["Version"] for v in props.iter("PackageVersion")}


def test_every_package_version_is_pinned_in_one_place_and_locked() -> None:
    versions = _package_versions()
    for name, version in versions.items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", version), f"{name} {version} is not one exact version"
    for path in _project_files():
        if path.suffix == ".props":
            continue
        project = ET.parse(path).getroot()
        references = {ref.attrib["Include"]: ref for ref in project.iter("PackageReference")}
        for name, ref in references.items():
            assert "Version" not in ref.attrib, (
                f"{path.name}: {name}'s version belongs in Directory.Packages.props"
            )
            assert name in versions, (
                f"{path.name}: {name} has no version in Directory.Packages.props"
            )
        # The lock file beside the project resolved the same versions.
        lock = json.loads((path.parent / "packages.lock.json").read_text())
        locked: set[str] = set()
        for framework, packages in lock["dependencies"].items():
            for name in set(references) & set(packages):
                assert packages[name]["resolved"] == versions[name], (path.name, framework, name)
                locked.add(name)
        assert locked == set(references), f"{path.name}: {set(references) - locked} not locked"
    build = ET.parse(DOTNET / "Directory.Build.props").getroot()
    assert build.findtext("PropertyGroup/TreatWarningsAsErrors") == "true"
    assert build.findtext("PropertyGroup/RestorePackagesWithLockFile") == "true"


def test_library_package_references() -> None:
    project = ET.parse(LIBRARY / "Contextd.Client.csproj").getroot()
    references = {ref.attrib["Include"]: ref for ref in project.iter("PackageReference")}
    assert set(references) >= REQUIRED_PACKAGES
    tools = references["Grpc.Tools"]
    private = tools.attrib.get("PrivateAssets") or tools.findtext("PrivateAssets")
    assert private == "all", "Grpc.Tools must not flow to the add-in"
    frameworks = project.findtext("PropertyGroup/TargetFrameworks", "").split(";")
    assert frameworks == ["netstandard2.0", "net10.0"], (
        ".NET Framework 4.8 add-ins need netstandard2.0"
    )
    async_interfaces = [
        group
        for group in project.iter("ItemGroup")
        if "netstandard2.0" in group.attrib.get("Condition", "")
        for ref in group.iter("PackageReference")
        if ref.attrib["Include"] == "Microsoft.Bcl.AsyncInterfaces"
    ]
    assert async_interfaces, "netstandard2.0 needs Microsoft.Bcl.AsyncInterfaces"


def test_solution_lists_every_project_with_its_configurations() -> None:
    solutions = sorted(DOTNET.rglob("*.sln"))
    assert solutions
    for solution in solutions:
        text = solution.read_text()
        assert text.lstrip("\ufeff\r\n").startswith(
            "Microsoft Visual Studio Solution File, Format Version 12.00"
        )
        projects = re.findall(
            r'^Project\("\{[0-9A-F-]{36}\}"\) = "([^"]+)", "([^"]+)", "\{([0-9A-F-]{36})\}"\s*$',
            text,
            re.M,
        )
        assert text.count("\nProject(") == len(projects) == text.count("\nEndProject")
        listed = {(solution.parent / path.replace("\\", "/")).resolve() for _, path, _ in projects}
        on_disk = {p.resolve() for p in _project_files() if p.suffix != ".props"}
        assert listed == on_disk
        for _, _, guid in projects:
            assert f"{{{guid}}}.Debug|Any CPU.Build.0" in text
            assert f"{{{guid}}}.Release|Any CPU.Build.0" in text


# (3) The wrapper covers every RPC, and the README says so.


def _wrapped_in_readme() -> dict[tuple[str, str], list[str]]:
    rows = re.findall(r"^\| `(\w+Service)` \| `(\w+)` \| (.+?) \|$", README.read_text(), re.M)
    return {(service, rpc): re.findall(r"`(\w+)`", methods) for service, rpc, methods in rows}


def _client_fields(source: str) -> dict[str, str]:
    """Service name -> the wrapper field holding its generated client."""
    return dict(re.findall(r"private readonly (\w+)\.\1Client (_\w+);", source))


def _method_body(source: str, signature: re.Pattern[str]) -> str:
    match = signature.search(source)
    assert match, f"no method matching {signature.pattern}"
    end = source.find("\n\n", match.end())
    return source[match.start() : end]


def test_readme_lists_every_rpc_of_the_protos() -> None:
    claimed = _wrapped_in_readme()
    assert set(claimed) == {(rpc.service, rpc.name) for rpc in rpcs()}


def test_wrapper_has_a_method_per_rpc_that_calls_it() -> None:
    source = WRAPPER.read_text()
    fields = _client_fields(source)
    all_rpcs = rpcs()
    assert {rpc.service for rpc in all_rpcs} == set(fields)
    for rpc in all_rpcs:
        call = f"{fields[rpc.service]}.{rpc.name}"
        if rpc.server_streaming:
            signature = re.compile(
                rf"public IAsyncEnumerable<{rpc.response}> {rpc.name}Async\({rpc.request} request,"
            )
            body = _method_body(source, signature)
            assert f"{call}(request," in body, f"{rpc.name}Async does not call {call}"
        else:
            signature = re.compile(
                rf"public Task<{rpc.response}> {rpc.name}Async\({rpc.request} request, "
                r"CancellationToken cancellationToken = default\)"
            )
            body = _method_body(source, signature)
            called = f"{call}Async(Required(request),"
            assert called in body, f"{rpc.name}Async does not call {call}Async"


def test_every_method_the_readme_names_exists_in_the_wrapper() -> None:
    public = set(re.findall(r"^\s*public (?!sealed )[\w<>?, ]+ (\w+)\(", WRAPPER.read_text(), re.M))
    for (service, rpc), methods in _wrapped_in_readme().items():
        assert methods, f"{service}.{rpc} names no method"
        for method in methods:
            assert method in public, f"README names {method} for {rpc}; the wrapper has none"


def test_vb_code_calls_only_methods_the_wrapper_has() -> None:
    public = set(re.findall(r"^\s*public (?!sealed )[\w<>?, ]+ (\w+)\(", WRAPPER.read_text(), re.M))
    calls = {name: set(re.findall(r"\bclient\.(\w+)\(", vb)) for name, vb in vb_code().items()}
    assert calls[SAMPLE.name] >= {
        "CreateSessionAsync",
        "BuildMessagesAsync",
        "RunChatTurnAsync",
        "CollectAsync",
    }
    for name, called in calls.items():
        assert called <= public, f"{name} calls {called - public}"


# (4) Credentials in the sample and the README.


def test_vb_code_shows_both_credentials_and_the_sample_reads_the_key_from_the_environment() -> None:
    sample = SAMPLE.read_text()
    assert 'Environment.GetEnvironmentVariable("CONTEXTD_API_KEY")' in sample
    assert re.search(r"^\s*options\.ApiKey = apiKey$", sample, re.M)
    readme = "\n".join(vb_code().values())
    assert ".TokenProvider = Function(" in readme
    assert ".ApiKey = " in readme


# (5) The layout: the library in src/, the tests in tests/, the samples in samples/, one
# public type per file, named for it.


def test_every_project_lives_in_its_folder_by_role() -> None:
    projects = {p.relative_to(DOTNET).parts[0] for p in _project_files() if p.suffix != ".props"}
    assert projects == {"src", "tests", "samples"}


def test_every_csharp_file_declares_at_most_one_public_type_named_as_the_file() -> None:
    top_level = re.compile(
        r"^    public (?:sealed |static |abstract |partial )*"
        r"(?:class|interface|enum|struct|record) (\w+)",
        re.M,
    )
    files = [p for p in DOTNET.rglob("*.cs") if not {"bin", "obj"} & set(p.parts)]
    assert len(files) > 20
    for path in files:
        public = top_level.findall(path.read_text())
        assert len(public) <= 1, f"{path.name} declares {public}"
        if public:
            assert path.stem == public[0], f"{path.name} declares {public[0]}"
