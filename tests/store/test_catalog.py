"""CatalogRepo on both engines: templates versioned on change and found in any case when asked,
skills filtered by app, reads kept until a write, and a tenant's own rows overriding the
defaults."""

from __future__ import annotations

import pytest
from contextd.store.catalog import CatalogRepo
from contextd.store.engine.database import Database
from contextd.store.models import Skill

A, B = "acme", "globex"


async def test_prompt_templates_are_versioned_on_change(db: Database) -> None:
    catalog = CatalogRepo(db)
    created = await catalog.upsert_template("excel", "You help with {{host}} sheets.")
    assert (created.version, created.enabled) == (1, True)
    same = await catalog.upsert_template("excel", "You help with {{host}} sheets.")
    assert same == created  # nothing changed: same version, same time
    changed = await catalog.upsert_template("excel", "You help with Excel.")
    assert changed.version == 2 and changed.updated_at >= created.updated_at
    disabled = await catalog.upsert_template("excel", "You help with Excel.", enabled=False)
    assert (disabled.version, disabled.enabled) == (3, False)
    await catalog.upsert_template("word", "You help with documents.")
    assert await catalog.get_template("excel") == disabled
    assert await catalog.get_template("ppt") is None
    assert [t.scenario for t in await catalog.list_templates()] == ["excel", "word"]
    assert await catalog.delete_template("excel") is True
    assert await catalog.delete_template("excel") is False
    assert [t.scenario for t in await catalog.list_templates()] == ["word"]
    recreated = await catalog.upsert_template("excel", "fresh")
    assert recreated.version == 1


async def test_skills_upsert_filter_and_delete(db: Database) -> None:
    catalog = CatalogRepo(db)
    chart = await catalog.upsert_skill(Skill("chart", "Make charts", "Use a chart.", ["excel"]))
    assert chart.updated_at > 0 and chart.apps == ("excel",)
    await catalog.upsert_skill(Skill("everywhere", "Polite", "Be polite.", []))
    await catalog.upsert_skill(Skill("redline", "Track changes", "Redline.", ["word", "wps"]))
    await catalog.upsert_skill(Skill("old", "Retired", "x", ["excel"], enabled=False))

    def names(skills: list[Skill]) -> list[str]:
        return [s.name for s in skills]

    assert names(await catalog.list_skills()) == ["chart", "everywhere", "old", "redline"]
    assert names(await catalog.list_skills("excel")) == ["chart", "everywhere", "old"]
    assert names(await catalog.list_skills("Excel", enabled_only=True)) == ["chart", "everywhere"]
    assert names(await catalog.list_skills("wps")) == ["everywhere", "redline"]
    assert names(await catalog.list_skills("outlook")) == ["everywhere"]
    assert names(await catalog.list_skills(enabled_only=True)) == [
        "chart",
        "everywhere",
        "redline",
    ]

    unchanged = await catalog.upsert_skill(Skill("chart", "Make charts", "Use a chart.", ["excel"]))
    assert unchanged == chart
    changed = await catalog.upsert_skill(Skill("chart", "Make charts", "v2", ["excel", "wps"]))
    assert changed.prompt == "v2" and changed.apps == ("excel", "wps")
    assert names(await catalog.list_skills("wps")) == ["chart", "everywhere", "redline"]

    assert await catalog.delete_skill("old") is True
    assert await catalog.delete_skill("old") is False
    assert "old" not in names(await catalog.list_skills())
    with pytest.raises(ValueError, match="name"):
        await catalog.upsert_skill(Skill(""))


async def test_template_found_ignoring_case_only_when_asked(db: Database) -> None:
    catalog = CatalogRepo(db)
    await catalog.upsert_template("Excel", "You help with sheets.")
    assert await catalog.get_template("excel") is None
    found = await catalog.get_template("excel", any_case=True)
    assert found is not None and found.scenario == "Excel"
    # The exact spelling wins over another one.
    await catalog.upsert_template("excel", "lower case")
    exact = await catalog.get_template("excel", any_case=True)
    assert exact is not None and exact.system_prompt == "lower case"
    other = await catalog.get_template("EXCEL", any_case=True)
    assert other is not None and other.scenario == "Excel"  # first by name


async def test_tenant_template_in_any_case_wins_over_the_default(db: Database) -> None:
    catalog = CatalogRepo(db)
    await catalog.upsert_template("excel", "default")
    await catalog.upsert_template("EXCEL", "tenant's own", tenant_id="acme")
    own = await catalog.get_template("Excel", tenant_id="acme", any_case=True)
    assert own is not None and own.system_prompt == "tenant's own"
    default = await catalog.get_template("Excel", tenant_id="other", any_case=True)
    assert default is not None and default.system_prompt == "default"


async def test_catalog_reads_follow_every_write(db: Database) -> None:
    catalog = CatalogRepo(db)
    assert await catalog.get_template("s") is None
    await catalog.upsert_template("s", "v1")
    template = await catalog.get_template("s")
    assert template is not None and template.system_prompt == "v1"
    await catalog.upsert_template("s", "v2")
    template = await catalog.get_template("s")
    assert template is not None and template.system_prompt == "v2"
    await catalog.delete_template("s")
    assert await catalog.get_template("s") is None

    assert await catalog.list_skills("excel", True) == []
    await catalog.upsert_skill(Skill("k", "d", "p", ["excel"], True))
    assert [s.name for s in await catalog.list_skills("excel", True)] == ["k"]
    await catalog.upsert_skill(Skill("k", "d", "p", ["excel"], False))
    assert await catalog.list_skills("excel", True) == []
    assert [s.enabled for s in await catalog.list_skills("excel")] == [False]
    await catalog.delete_skill("k")
    assert await catalog.list_skills("excel") == []


async def test_templates_and_skills_are_overridden_per_tenant(db: Database) -> None:
    catalog = CatalogRepo(db)
    await catalog.upsert_template("excel", "server-wide")
    await catalog.upsert_skill(Skill("charts", prompt="default charts"))
    await catalog.upsert_skill(Skill("tables", prompt="default tables"))
    # A tenant without overrides reads the defaults.
    template = await catalog.get_template("excel", tenant_id=A)
    assert template is not None and template.system_prompt == "server-wide"
    # An override is read by its tenant only.
    await catalog.upsert_template("excel", "acme's", tenant_id=A)
    await catalog.upsert_skill(Skill("charts", prompt="acme charts"), tenant_id=A)
    await catalog.upsert_skill(Skill("tables", prompt="off", enabled=False), tenant_id=A)
    await catalog.upsert_skill(Skill("acme-only", prompt="acme's own"), tenant_id=A)
    template = await catalog.get_template("excel", tenant_id=A)
    assert template is not None and template.system_prompt == "acme's"
    template = await catalog.get_template("excel", tenant_id=B)
    assert template is not None and template.system_prompt == "server-wide"
    template = await catalog.get_template("excel")
    assert template is not None and template.system_prompt == "server-wide"
    assert [t.system_prompt for t in await catalog.list_templates(tenant_id=A)] == ["acme's"]
    assert [t.system_prompt for t in await catalog.list_templates(tenant_id=B)] == ["server-wide"]
    assert [(s.name, s.prompt) for s in await catalog.list_skills(tenant_id=A)] == [
        ("acme-only", "acme's own"),
        ("charts", "acme charts"),
        ("tables", "off"),
    ]
    assert [s.name for s in await catalog.list_skills(enabled_only=True, tenant_id=A)] == [
        "acme-only",
        "charts",
    ]
    assert [(s.name, s.prompt) for s in await catalog.list_skills(tenant_id=B)] == [
        ("charts", "default charts"),
        ("tables", "default tables"),
    ]
    # A tenant deletes only its own rows: never a default, never another tenant's.
    assert not await catalog.delete_template("excel", tenant_id=B)
    assert not await catalog.delete_skill("acme-only", tenant_id=B)
    assert await catalog.delete_template("excel", tenant_id=A)
    template = await catalog.get_template("excel", tenant_id=A)
    assert template is not None and template.system_prompt == "server-wide"
    assert await catalog.delete_skill("charts", tenant_id=A)
    assert [(s.name, s.prompt) for s in await catalog.list_skills("excel", tenant_id=A)][1] == (
        "charts",
        "default charts",
    )
    assert not await catalog.delete_template("excel", tenant_id=A)
