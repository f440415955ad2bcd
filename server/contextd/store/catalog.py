"""The catalog for the ``scenario`` layer: prompt templates per scenario, and skills per
host app, per tenant.

The default tenant's templates and skills are the server-wide defaults. Another tenant
reads its own row of a name when it has one, else the default; it writes and deletes only
its own rows, so deleting its override brings the default back.

Every session-mode build reads the skills (and the scenario's template): reads are kept in
memory and all of them dropped by any write once it committed (the rule in store/engine/sqlite.py),
since this class is the tables' only writer in this process, the database's only writer.
On PostgreSQL, where another server may write, every write moves the catalog's version on
(``Database.next_catalog_version``) and kept reads answer only a read that names the
version its call read (store/sessions.py reads it with the session); reads kept
at another version go.
"""

from __future__ import annotations

import json
import time
from typing import Any

from contextd.core.identity import DEFAULT_TENANT
from contextd.store.engine.database import Database
from contextd.store.models import PromptTemplate, Skill

_TEMPLATE_COLUMNS = "scenario, system_prompt, version, enabled, updated_at"
_SKILL_COLUMNS = "name, description, prompt, apps, enabled, updated_at"
# A tenant's own rows, and the defaults it has no row of the same name for.
_TEMPLATES_OF_TENANT = (
    "(tenant_id = :tenant OR (tenant_id = 'default' AND NOT EXISTS ("
    " SELECT 1 FROM prompt_templates o WHERE o.tenant_id = :tenant"
    " AND o.scenario = prompt_templates.scenario)))"
)
_SKILLS_OF_TENANT = (
    "(tenant_id = :tenant OR (tenant_id = 'default' AND NOT EXISTS ("
    " SELECT 1 FROM skills o WHERE o.tenant_id = :tenant AND o.name = skills.name)))"
)
# Different reads kept (tenants, scenarios and hosts asked for); past this, all are dropped.
READ_CACHE_ENTRIES = 256


def _template_from_row(row: Any) -> PromptTemplate:
    return PromptTemplate(
        scenario=row["scenario"],
        system_prompt=row["system_prompt"],
        version=row["version"],
        enabled=bool(row["enabled"]),
        updated_at=row["updated_at"],
    )


def _skill_from_row(row: Any) -> Skill:
    return Skill(
        name=row["name"],
        description=row["description"],
        prompt=row["prompt"],
        apps=tuple(json.loads(row["apps"])),
        enabled=bool(row["enabled"]),
        updated_at=row["updated_at"],
    )


class CatalogRepo:
    def __init__(self, db: Database) -> None:
        self._db = db
        # Where other processes write, reads are kept at the catalog version they were
        # read at (``_version``), and answer only reads that name it.
        self._versioned = db.shared_between_processes
        self._version: int | None = None
        self._templates: dict[tuple[str, str, bool], PromptTemplate | None] = {}
        self._skills: dict[tuple[str, str | None, bool], tuple[Skill, ...]] = {}

    def _changed(self, version: int | None) -> None:
        """A write committed, moving the catalog's version on to ``version``."""
        self._templates.clear()
        self._skills.clear()
        self._version = version

    def _kept(self, version: int | None) -> bool:
        """Whether a read of a call that read the catalog at ``version`` may use (and
        keep) reads in memory; reads kept at another version go."""
        if not self._versioned:
            return True
        if version is None:
            return False
        if version != self._version:
            self._changed(version)
        return True

    # --- prompt templates ---------------------------------------------------------------

    async def upsert_template(
        self,
        scenario: str,
        system_prompt: str,
        enabled: bool = True,
        *,
        tenant_id: str = DEFAULT_TENANT,
    ) -> PromptTemplate:
        """Create (version 1) or change the tenant's template of the scenario; each change
        adds 1 to its version, while writing what is already stored changes nothing."""
        async with self._db.transaction() as conn:
            version = await self._db.next_catalog_version(conn)
            rows = await conn.execute_fetchall(
                f"INSERT INTO prompt_templates (tenant_id, {_TEMPLATE_COLUMNS})"
                " VALUES (?, ?, ?, 1, ?, ?)"
                " ON CONFLICT (tenant_id, scenario) DO UPDATE"
                "  SET system_prompt = excluded.system_prompt,"
                "  enabled = excluded.enabled, version = prompt_templates.version + 1,"
                "  updated_at = excluded.updated_at"
                " WHERE prompt_templates.system_prompt IS DISTINCT FROM excluded.system_prompt"
                "  OR prompt_templates.enabled IS DISTINCT FROM excluded.enabled"
                f" RETURNING {_TEMPLATE_COLUMNS}",
                (tenant_id, scenario, system_prompt, int(enabled), time.time()),
            )
            if not rows:  # unchanged
                rows = await conn.execute_fetchall(
                    f"SELECT {_TEMPLATE_COLUMNS} FROM prompt_templates"
                    " WHERE tenant_id = ? AND scenario = ?",
                    (tenant_id, scenario),
                )
        self._changed(version)
        return _template_from_row(next(iter(rows)))

    async def get_template(
        self,
        scenario: str,
        *,
        tenant_id: str = DEFAULT_TENANT,
        any_case: bool = False,
        version: int | None = None,
    ) -> PromptTemplate | None:
        """The tenant's template of the scenario, else the default one (shared with later
        calls: it is frozen). With ``any_case``, the scenario's name is compared ignoring
        ASCII case (scenario names are ASCII); among several matches the tenant's own,
        then the exact spelling, then the first by name wins. ``version``: the catalog's,
        as the caller's call read it (the class docstring)."""
        key = (tenant_id, scenario, any_case)
        kept = self._kept(version)
        if kept and key in self._templates:
            return self._templates[key]
        match = "lower(scenario) = lower(:scenario)" if any_case else "scenario = :scenario"
        rows = await self._db.reader.execute_fetchall(
            f"SELECT {_TEMPLATE_COLUMNS} FROM prompt_templates"
            f" WHERE {match} AND tenant_id IN (:tenant, 'default')"
            " ORDER BY tenant_id = 'default', scenario <> :scenario, scenario LIMIT 1",
            {"scenario": scenario, "tenant": tenant_id},
        )
        template = next((_template_from_row(row) for row in rows), None)
        if kept and self._version == version:  # not moved on by a write meanwhile
            if len(self._templates) >= READ_CACHE_ENTRIES:
                self._templates.clear()
            self._templates[key] = template
        return template

    async def list_templates(self, *, tenant_id: str = DEFAULT_TENANT) -> list[PromptTemplate]:
        """The templates the tenant reads: its own, and the defaults it did not override."""
        rows = await self._db.reader.execute_fetchall(
            f"SELECT {_TEMPLATE_COLUMNS} FROM prompt_templates"
            f" WHERE {_TEMPLATES_OF_TENANT} ORDER BY scenario",
            {"tenant": tenant_id},
        )
        return [_template_from_row(row) for row in rows]

    async def delete_template(self, scenario: str, *, tenant_id: str = DEFAULT_TENANT) -> bool:
        """Delete the tenant's own template of the scenario (never a default for another
        tenant); False when it has none."""
        async with self._db.transaction() as conn:
            version = await self._db.next_catalog_version(conn)
            cursor = await conn.execute(
                "DELETE FROM prompt_templates WHERE tenant_id = ? AND scenario = ?",
                (tenant_id, scenario),
            )
        self._changed(version)
        return cursor.rowcount > 0

    # --- skills -------------------------------------------------------------------------

    async def upsert_skill(self, skill: Skill, *, tenant_id: str = DEFAULT_TENANT) -> Skill:
        """Create or replace the tenant's skill named ``skill.name``; the stored skill is
        returned (``updated_at`` moves only when something changed)."""
        if not skill.name:
            raise ValueError("a skill needs a name")
        apps = json.dumps(list(skill.apps), ensure_ascii=False)
        async with self._db.transaction() as conn:
            version = await self._db.next_catalog_version(conn)
            rows = await conn.execute_fetchall(
                f"INSERT INTO skills (tenant_id, {_SKILL_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (tenant_id, name) DO UPDATE SET description = excluded.description,"
                "  prompt = excluded.prompt, apps = excluded.apps, enabled = excluded.enabled,"
                "  updated_at = excluded.updated_at"
                " WHERE skills.description IS DISTINCT FROM excluded.description"
                "  OR skills.prompt IS DISTINCT FROM excluded.prompt"
                "  OR skills.apps IS DISTINCT FROM excluded.apps"
                "  OR skills.enabled IS DISTINCT FROM excluded.enabled"
                f" RETURNING {_SKILL_COLUMNS}",
                (
                    tenant_id,
                    skill.name,
                    skill.description,
                    skill.prompt,
                    apps,
                    int(skill.enabled),
                    time.time(),
                ),
            )
            if not rows:  # unchanged
                rows = await conn.execute_fetchall(
                    f"SELECT {_SKILL_COLUMNS} FROM skills WHERE tenant_id = ? AND name = ?",
                    (tenant_id, skill.name),
                )
        self._changed(version)
        return _skill_from_row(next(iter(rows)))

    async def list_skills(
        self,
        app: str | None = None,
        enabled_only: bool = False,
        *,
        tenant_id: str = DEFAULT_TENANT,
        version: int | None = None,
    ) -> list[Skill]:
        """The tenant's skills (its own, and the defaults it did not override) by name.
        With ``app``, only those whose apps include it (ignoring ASCII case: "Excel" finds
        "excel") or whose apps list is empty (every app). The skills are shared with later
        calls (they are frozen). A tenant's override decides for its name: a disabled or
        other-app override hides the default. ``version``: as ``get_template``'s."""
        key = (tenant_id, app, enabled_only)
        kept = self._kept(version)
        cached = self._skills.get(key) if kept else None
        if cached is not None:
            return list(cached)
        rows = await self._db.reader.execute_fetchall(
            f"SELECT {_SKILL_COLUMNS} FROM skills"
            f" WHERE {_SKILLS_OF_TENANT} AND (:enabled_only = 0 OR enabled = 1)"
            "  AND (CAST(:app AS TEXT) IS NULL OR json_array_length(apps) = 0"
            "   OR EXISTS (SELECT 1 FROM json_each(skills.apps) WHERE lower(value) = lower(:app)))"
            " ORDER BY name",
            {"tenant": tenant_id, "enabled_only": int(enabled_only), "app": app},
        )
        skills = [_skill_from_row(row) for row in rows]
        if kept and self._version == version:  # not moved on by a write meanwhile
            if len(self._skills) >= READ_CACHE_ENTRIES:
                self._skills.clear()
            self._skills[key] = tuple(skills)
        return skills

    async def delete_skill(self, name: str, *, tenant_id: str = DEFAULT_TENANT) -> bool:
        """Delete the tenant's own skill (never a default for another tenant); False when
        it has none."""
        async with self._db.transaction() as conn:
            version = await self._db.next_catalog_version(conn)
            cursor = await conn.execute(
                "DELETE FROM skills WHERE tenant_id = ? AND name = ?", (tenant_id, name)
            )
        self._changed(version)
        return cursor.rowcount > 0
