"""Checks the .NET client's use of its packages against the checked-in list of their API.

The list (clients/dotnet/api/external-api.json) holds, per member of Grpc.Core.Api,
Grpc.Net.Client, Grpc.Net.Client.Web, Grpc.StatusProto (with the Google.Api.CommonProtos
types it brings) and Google.Protobuf the code uses, the signature read from the package's
source at the pinned release's commit. `find_problems` walks the tokens of one C# or VB file
and reports, as readable lines, every use the list (or the project's own and generated
names, or the base-library names) does not account for.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.dotnet_source import IDENT, Token, tokenize

# C# keywords that can stand before a declared name without being its type.
_CS_NOT_A_TYPE = {
    "return", "new", "await", "throw", "is", "as", "in", "yield", "case", "typeof", "nameof",
    "else", "using", "out", "ref", "params", "this", "base", "goto", "when", "not", "and", "or",
}  # fmt: skip
_CS_TYPE_KEYWORDS = {"class", "struct", "interface", "enum", "namespace", "delegate"}
_VB_KEYWORDS = {
    "AddHandler", "AddressOf", "And", "AndAlso", "As", "Async", "Await", "Boolean", "ByVal",
    "Case", "Catch", "Class", "Dim", "Do", "Double", "Each", "Else", "ElseIf", "End", "Exit",
    "False", "Finally", "For", "Function", "Handles", "If", "Imports", "In", "Integer", "Is",
    "IsNot", "Long", "Loop", "Me", "Module", "New", "Next", "Not", "Nothing", "Of", "Or",
    "OrElse", "Private", "Public", "Return", "Select", "Shared", "String", "Sub", "Then",
    "Throw", "To", "True", "Try", "Using", "When", "While", "With",
}  # fmt: skip
_DECLARATION_FOLLOWERS = {"(", "{", ";", "=", ",", ")", ":"}
_TYPE_PARAMETER = re.compile(r"T([A-Z]\w*)?")


@dataclass(frozen=True)
class Member:
    type: str
    name: str
    returns: str | None
    extends: str | None
    condition: str | None


@dataclass
class ExternalApi:
    """The checked-in list: package types by full name, their members, extension methods."""

    types: set[str] = field(default_factory=set)
    bases: dict[str, str] = field(default_factory=dict)
    members: dict[str, dict[str, Member]] = field(default_factory=dict)
    extensions: dict[str, list[tuple[str, Member]]] = field(default_factory=dict)
    bcl_namespaces: set[str] = field(default_factory=set)
    bcl_names: set[str] = field(default_factory=set)

    @property
    def namespaces(self) -> set[str]:
        found = set(self.bcl_namespaces)
        for full_name in self.types:
            parts = full_name.split(".")
            found |= {".".join(parts[:i]) for i in range(1, len(parts))}
        return found - self.types

    @property
    def member_names(self) -> set[str]:
        return {name for members in self.members.values() for name in members}

    def member(self, type_name: str, name: str, imported: set[str]) -> Member | None:
        """A member of the type or its base, or an extension method whose namespace is imported."""
        current: str | None = type_name
        while current:
            if current not in self.types:
                # A base-library base type (RepeatedField is an IList): its names are listed
                # without their owners.
                return Member(current, name, None, None, None) if name in self.bcl_names else None
            if name in self.members.get(current, {}):
                return self.members[current][name]
            current = self.bases.get(current)
        for namespace, extension in self.extensions.get(name, []):
            if extension.extends == type_name and namespace in imported:
                return extension
        return None


def load_api(path: Path) -> ExternalApi:
    data = json.loads(path.read_text())
    api = ExternalApi()
    for entry in data["members"]:
        type_name = entry["type"]
        api.types.add(type_name)
        if "base" in entry:
            api.bases[type_name] = entry["base"]
        if entry["member"] is None:
            continue
        member = Member(
            type_name,
            entry["member"],
            entry.get("returns"),
            entry.get("extends"),
            entry.get("condition"),
        )
        api.members.setdefault(type_name, {})[member.name] = member
        if member.extends:
            namespace = type_name.rpartition(".")[0]
            api.extensions.setdefault(member.name, []).append((namespace, member))
    api.bcl_namespaces = set(data["bcl"]["namespaces"])
    api.bcl_names = set(data["bcl"]["names"])
    return api


def declared_names(tokens: list[Token], *, vb: bool = False) -> set[str]:
    """Names the code declares: types, members, parameters and locals (`Type name` + `(`...)."""
    names: set[str] = set()
    for before, token, after in zip(tokens, tokens[1:], tokens[2:], strict=False):
        if token.kind != IDENT:
            continue
        if vb:
            if before.text in {"Module", "Class", "Function", "Sub", "Dim"}:
                names.add(token.text)
            continue
        if before.text in {"<", ","} and _TYPE_PARAMETER.fullmatch(token.text):
            names.add(token.text)
        if before.text in _CS_TYPE_KEYWORDS:
            names.add(token.text)
        typed = before.kind == IDENT and before.text not in _CS_NOT_A_TYPE
        if (typed or before.text in {">", "?", "]"}) and after.text in _DECLARATION_FOLLOWERS:
            names.add(token.text)
    return names


@dataclass(frozen=True)
class _Chain:
    """A dotted chain `a.b?.c<T>`: its identifiers and type arguments, where it starts and ends."""

    start: int
    end: int
    names: list[Token]
    type_args: list[Token]


@dataclass
class _Scan:
    api: ExternalApi
    known: set[str]
    vb: bool
    tokens: list[Token]
    imported: set[str] = field(default_factory=set)
    # The type of each local and parameter as last declared (None: not a listed type).
    variables: dict[str, str | None] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def report(self, token: Token, problem: str) -> None:
        self.problems.append(f"line {token.line}: {problem}")

    def simple_type(self, name: str) -> str | None:
        matches = {f"{ns}.{name}" for ns in self.imported} & self.api.types
        return matches.pop() if len(matches) == 1 else None

    def text(self, index: int) -> str:
        return self.tokens[index].text if 0 <= index < len(self.tokens) else ""


def _chains(tokens: list[Token]) -> Iterator[_Chain]:
    """The chains in order. One ends at a call's `(`: what follows the call
    (`.ConfigureAwait`) starts a chain of its own. Type arguments are chains of their own too.
    """
    i = 0
    while i < len(tokens):
        token = tokens[i]
        vb_member = token.text == "." and (i == 0 or tokens[i - 1].text in "{,(")
        if token.kind != IDENT and not vb_member:
            i += 1
            continue
        start, names, type_args, arguments = i, [], [], []
        if vb_member:
            names.append(token)  # a VB initializer's `.Name`
            i += 1
        while i < len(tokens) and tokens[i].kind == IDENT:
            names.append(tokens[i])
            i += 1
            close = _generic_close(tokens, i)
            if close:
                arguments += [k for k in range(i, close) if tokens[k].kind == IDENT]
                type_args += [tokens[k] for k in range(i, close) if tokens[k].kind == IDENT]
                i = close
            if i + 1 < len(tokens) and tokens[i].text in {".", "?."}:
                i += 1
                continue
            break
        yield _Chain(start, i, names, type_args)
        for k in arguments:
            yield _Chain(k, k + 1, [tokens[k]], [])


def _generic_close(tokens: list[Token], i: int) -> int | None:
    """The index after a `<...>` type-argument list opening at i, if one does."""
    if i >= len(tokens) or tokens[i].text != "<":
        return None
    j = i + 1
    while j < len(tokens) and (tokens[j].kind == IDENT or tokens[j].text in {",", "."}):
        j += 1
    if j + 1 >= len(tokens) or tokens[j].text != ">":
        return None
    follower = tokens[j + 1]
    return (
        j + 1 if follower.text in {"(", ")", ",", ";", "?", "."} or follower.kind == IDENT else None
    )


def _imports(scan: _Scan) -> None:
    keyword = "Imports" if scan.vb else "using"
    for chain in _chains(scan.tokens):
        if scan.text(chain.start - 1) != keyword:
            continue
        if not scan.vb and scan.text(chain.end) != ";":
            continue  # `using var x = ...`, a using statement
        namespace = ".".join(t.text for t in chain.names)
        scan.imported.add(namespace)
        if not (namespace.startswith("Contextd.") or namespace in scan.api.namespaces):
            scan.report(chain.names[0], f"namespace {namespace} is in no listed package")


def _resolve(scan: _Scan, chain: _Chain) -> tuple[str | None, bool]:
    """Follows a chain through namespaces, a type and its listed members, reporting what is
    unknown. Returns the type the chain ends on, and whether it names that type itself."""
    names = [t.text for t in chain.names]
    head = names[0]
    current: str | None = None
    i = 0
    if head == ".":
        i = 1
    elif head in scan.variables:
        current, i = scan.variables[head], 1
    else:
        # The longest prefix that is a type or a namespace; then a type imported by name.
        for j in range(len(names), 0, -1):
            prefix = ".".join(names[:j])
            if prefix in scan.api.types:
                current, i = prefix, j
                break
            if prefix in scan.api.namespaces or prefix.startswith("Contextd"):
                i = j
                break
        if current is None and i < len(names):
            current = scan.simple_type(names[i])
            if current:
                i += 1
            elif i == 0:
                # A lower-case head is a keyword, a local or a parameter.
                vb_keyword = scan.vb and head in _VB_KEYWORDS
                if head[0].isupper() and head not in scan.known and not vb_keyword:
                    scan.report(chain.names[0], f"unknown name {head}")
                i = 1
    names_type = i == len(names) and current is not None and head not in scan.variables
    generic = next(filter(None, (scan.simple_type(t.text) for t in chain.type_args)), None)
    for token in chain.names[i:]:
        name = token.text
        if current in scan.api.types:
            member = scan.api.member(current, name, scan.imported)
            if member is None:
                scan.report(token, f"{current} has no listed member {name}")
                return None, False
            if member.condition and member.condition not in token.conditions:
                scan.report(token, f"{current}.{name} exists only under #if {member.condition}")
            current = generic if member.returns == "T" else member.returns
            continue
        current = None
        if name not in scan.known:
            scan.report(token, f"no listed or project member {name}")
            return None, False
    return current, names_type


def _declare(scan: _Scan, chain: _Chain, type_name: str | None, names_type: bool) -> None:
    """Records the locals and parameters a chain declares or initializes."""
    before = [scan.text(chain.start - k) for k in (3, 2, 1)]
    after = chain.end + (scan.text(chain.end) == "?")
    if chain.names[0].text in {"var", "Dim"} and scan.tokens[chain.end].kind == IDENT:
        scan.variables[scan.text(chain.end)] = None  # typed below if its initializer says
    elif names_type and after < len(scan.tokens) and scan.tokens[after].kind == IDENT:
        scan.variables[scan.text(after)] = type_name  # `Type name`, `Type? name`
    if before[1:] == ["=", "new"] or (scan.vb and before[1:] == ["As", "New"]):
        scan.variables[before[0]] = type_name if names_type else None
    elif before[2] == "=" and before[0] in {"var", "Dim"}:
        scan.variables[before[1]] = type_name
    elif scan.vb and before[2] == "As":
        scan.variables[before[1]] = type_name if names_type else None


def find_problems(
    source: str, *, vb: bool, api: ExternalApi, known: set[str]
) -> tuple[list[str], set[str]]:
    """Problems in one file, and the full names of the listed types it uses."""
    tokens = [t for t in tokenize(source, vb=vb) if t.text != "_"]
    scan = _Scan(api, known | api.bcl_names | api.member_names, vb, tokens)
    _imports(scan)
    used: set[str] = set()
    for chain in _chains(tokens):
        if scan.text(chain.start - 1) in {"using", "Imports", "namespace"}:
            continue  # checked by _imports (the project's own namespace is declared)
        type_name, names_type = _resolve(scan, chain)
        _declare(scan, chain, type_name, names_type)
        if names_type and type_name:
            used.add(type_name)
    return scan.problems, used
