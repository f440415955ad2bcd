"""The documentation keeps up with the code: README.md and docs/*.md.

- every `contextd serve` flag, read from the real parser, is in docs/configuration.md
  with its environment variable, and that page's flag table names no flag that is gone;
- every RPC of every contextd.v1 service, read from the generated descriptors, has
  its row in README.md's services table (which lists nothing else) and is described
  in a page of docs/ besides the grpcurl walkthrough (whose own test covers it);
- README.md stays under 10,000 characters, its two commands are Makefile targets,
  and its quickstart runs against a live server;
- every relative link of README.md, docs/*.md, bench/HISTORY.md and the other READMEs
  (bench/, clients/) points to a file that exists, and a `#fragment` into a Markdown
  file to one of its headings.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from contextd import config, v1
from contextd.commands import main as cli

from tests.support.paths import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
CONFIGURATION = DOCS / "configuration.md"
WALKTHROUGH = DOCS / "grpcurl.md"
README_LIMIT = 10_000
README_ADDRESS = "127.0.0.1:50151"

FENCE = re.compile(r"^```.*?^```[ \t]*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)


def linking_pages() -> list[Path]:
    """The pages whose links are checked: they link into each other."""
    others = [
        ROOT / "bench" / "README.md",
        ROOT / "bench" / "HISTORY.md",
        *sorted(ROOT.glob("clients/*/README.md")),
    ]
    return [README, *sorted(DOCS.glob("*.md")), *others]


def prose(text: str) -> str:
    """Markdown without its fenced code blocks (a `#` or `](` there is not markup)."""
    return FENCE.sub("", text)


# `contextd serve` flags -------------------------------------------------------------


def serve_parser() -> argparse.ArgumentParser:
    parser = cli._parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            serve: argparse.ArgumentParser = action.choices["serve"]
            return serve
    raise AssertionError("the contextd command has no subcommands")


def serve_flags() -> dict[str, str]:
    """Every long flag of `contextd serve` (but --help), with its setting's name."""
    return {
        option: action.dest
        for action in serve_parser()._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }


def documented_flags(text: str) -> set[str]:
    """The flags of the first column of the page's flag table."""
    return set(re.findall(r"^\| `(--[a-z0-9-]+)` \|", text, re.MULTILINE))


def test_the_parser_has_the_flags_we_know() -> None:
    # Guards the reading itself: an empty or wrong parser would make the next test vacuous.
    flags = serve_flags()
    assert {"--port", "--data-dir", "--provider", "--web-port"} <= set(flags)
    assert flags["--data-dir"] == "data_dir"


def test_every_serve_flag_and_its_variable_is_in_configuration_md() -> None:
    text = CONFIGURATION.read_text(encoding="utf-8")
    missing = [
        f"{flag} / {config.ENV_PREFIX}{dest.upper()}"
        for flag, dest in serve_flags().items()
        if f"`{flag}`" not in text or f"`{config.ENV_PREFIX}{dest.upper()}`" not in text
    ]
    assert missing == [], f"document these in {CONFIGURATION.relative_to(ROOT)}"


def test_configuration_md_documents_no_flag_that_is_gone() -> None:
    documented = documented_flags(CONFIGURATION.read_text(encoding="utf-8"))
    assert documented, "configuration.md has no flag table"
    assert documented - set(serve_flags()) == set()


# RPCs ------------------------------------------------------------------------------


def rpcs() -> set[tuple[str, str]]:
    """(service, method) for every service of package contextd.v1."""
    found: set[tuple[str, str]] = set()
    for module_info in pkgutil.iter_modules(v1.__path__):
        if not module_info.name.endswith("_pb2"):
            continue
        module = importlib.import_module(f"{v1.__name__}.{module_info.name}")
        for service in module.DESCRIPTOR.services_by_name.values():
            if service.full_name.startswith("contextd.v1."):
                found.update((service.name, method.name) for method in service.methods)
    return found


def services_table(text: str) -> Iterator[tuple[str, str]]:
    """(service, RPC) rows of README.md's "## Services" table; an empty first cell
    continues the service above."""
    section = text.split("\n## Services\n", 1)[1].split("\n## ", 1)[0]
    service = ""
    for row in re.finditer(r"^\| *(`(\w+)`)? *\| *`(\w+)` *\|", section, re.MULTILINE):
        service = row[2] or service
        yield service, row[3]


def test_the_descriptors_have_the_rpcs_we_know() -> None:
    found = rpcs()
    assert len({service for service, _ in found}) >= 5
    assert {("ChatService", "StreamChat"), ("ContextService", "BuildMessages")} <= found


def test_readme_lists_every_rpc_under_its_service_and_nothing_else() -> None:
    listed = list(services_table(README.read_text(encoding="utf-8")))
    assert len(listed) == len(set(listed)), "an RPC is listed twice"
    assert set(listed) == rpcs()


def test_every_rpc_is_described_in_docs() -> None:
    text = "\n".join(
        page.read_text(encoding="utf-8") for page in DOCS.glob("*.md") if page != WALKTHROUGH
    )
    missing = sorted(
        f"{service}/{method}" for service, method in rpcs() if not re.search(rf"\b{method}\b", text)
    )
    assert missing == [], "describe these in a page of docs/"


# README ----------------------------------------------------------------------------


def test_readme_stays_short() -> None:
    size = len(README.read_text(encoding="utf-8"))
    assert size < README_LIMIT, f"README.md has {size} characters; move detail to docs/"


def test_readme_commands_are_makefile_targets() -> None:
    text = README.read_text(encoding="utf-8")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in ("run", "test"):
        assert f"\nmake {target}" in text
        assert re.search(rf"^{target}:", makefile, re.MULTILINE), target


def test_make_run_installs_the_sdk_contextd_chat_needs(tmp_path: Path) -> None:
    """The README offers `contextd chat` beside `make run`, so `make run` installs its SDK."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()  # as if made: make only prints what it would install
    # Run from make test, the outer make's variables would reach this one.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", f"VENV={venv}", "run"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    installs = [line for line in done.stdout.splitlines() if " pip install " in line]
    assert any("-e ./clients/python" in line for line in installs), done.stdout
    assert done.stdout.rstrip().endswith(f"{venv}/bin/contextd serve")


def quickstart() -> str:
    blocks = re.findall(r"^```python\n(.*?)^```$", README.read_text(encoding="utf-8"), re.M | re.S)
    assert len(blocks) == 1, "README.md's quickstart is one python block"
    code: str = blocks[0]
    assert README_ADDRESS in code
    return code


def test_readme_quickstart_runs(address: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = quickstart().replace(README_ADDRESS, address)
    exec(compile(code, str(README), "exec"), {"__name__": "__readme__"})
    printed = capsys.readouterr().out
    assert "'messages'" in printed and "reason='budget'" in printed


# Links -----------------------------------------------------------------------------


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation gone, - for spaces."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out: set[str] = set()
    for heading in HEADING.findall(prose(page.read_text(encoding="utf-8"))):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def broken_links(page: Path) -> list[str]:
    text = CODE_SPAN.sub("", prose(page.read_text(encoding="utf-8")))
    broken: list[str] = []
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, fragment = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            broken.append(f"{target}: no such heading")
    return broken


@pytest.mark.parametrize("page", linking_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_to_something(page: Path) -> None:
    assert broken_links(page) == []


def test_the_link_check_catches_what_it_should(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# Title\n\n## A `code` heading: yes\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md) [ok](there.md#a-code-heading-yes) [ok](https://example.com/x)\n"
        "[gone](missing.md) [no heading](there.md#nope)\n"
        "`[in code](missing.md)`\n```\n[in a fence](missing.md)\n```\n"
    )
    assert broken_links(page) == ["missing.md: no such file", "there.md#nope: no such heading"]


# Paths named in prose ---------------------------------------------------------------

# A repository path in a code span, e.g. `tests/api/test_contract.py` or `bench/`.
REPO_PATH = re.compile(r"`((?:tests|server|clients|bench|scripts|docs|protos)/[\w./-]*)`")


def missing_paths(page: Path) -> list[str]:
    """Repository paths a page names in code spans that do not exist (built ones aside)."""
    names = REPO_PATH.findall(prose(page.read_text(encoding="utf-8")))
    built = ("/dist", "/node_modules", "/gen", "/.built", "/.installed")
    # NNNN stands for digits, as in migrations/NNNN_name.sql.
    exists = [n for n in names if any(ROOT.glob(re.sub(r"N{2,}_\w+", "*", n)))]
    return [n for n in names if n not in exists and not any(b in n for b in built)]


@pytest.mark.parametrize("page", linking_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_named_paths_exist(page: Path) -> None:
    assert missing_paths(page) == []


def test_the_path_check_catches_a_moved_file(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("`tests/test_docs.py` runs; `tests/test_gone.py` moved.\n")
    assert missing_paths(page) == ["tests/test_gone.py"]
