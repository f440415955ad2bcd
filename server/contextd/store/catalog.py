"""Server-wide catalog for the ``scenario`` layer: prompt templates per scenario, and skills
per host app.

Every session-mode build reads the skills (and the scenario's template): reads are kept in
memory and all of them dropped by any write once it committed (the rule in store/db.py),
since this class is the tables' only writer in this process, the database's only writer.
"""

from __future__ import annotations

import json
import time
from typing import Any

from contextd.store.db import Database
from contextd.store.models import PromptTemplate, Skill

_TEMPLATE_COLUMNS = "scenario, system_prompt, version, enabled, updated_at"
_SKILL_COLUMNS = "name, description, prompt, apps, enabled, updated_at"
# Different reads kept (scenarios and hosts asked for); past this, all are dropped.
READ_CACHE_ENTRIES = 256


def _template_from_row(row: Any) -> PromptTemplate:
    scenario, system_prompt, version, enabled, updated_at = row
    return PromptTemplate(scenario, system_prompt, version, bool(enabled), updated_at)


def _skill_from_row(row: Any) -> Skill:
    name, description, prompt, apps, enabled, updated_at = row
    return Skill(name, description, prompt, tuple(json.loads(apps)), bool(enabled), updated_at)


class CatalogRepo:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._templates: dict[str, PromptTemplate | None] = {}
        self._skills: dict[tuple[str | None, bool], tuple[Skill, ...]] = {}

    def _changed(self) -> None:
        self._templates.clear()
        self._skills.clear()

    # --- prompt templates ---------------------------------------------------------------

    async def upsert_template(
        self, scenario: str, system_prompt: str, enabled: bool = True
    ) -> PromptTemplate:
        """Create (version 1) or change the scenario's template; each change adds 1 to its
        version, while writing what is already stored changes nothing."""
        async with self._db.transaction() as conn:
            rows = await conn.execute_fetchall(
                f"INSERT INTO prompt_templates ({_TEMPLATE_COLUMNS}) VALUES (?, ?, 1, ?, ?)"
                " ON CONFLICT (scenario) DO UPDATE SET system_prompt = excluded.system_prompt,"
                "  enabled = excluded.enabled, version = version + 1,"
                "  updated_at = excluded.updated_at"
                " WHERE system_prompt IS NOT excluded.system_prompt"
                "  OR enabled IS NOT excluded.enabled"
                f" RETURNING {_TEMPLATE_COLUMNS}",
                (scenario, system_prompt, int(enabled), time.time()),
            )
            if not rows:  # unchanged
                rows = await conn.execute_fetchall(
                    f"SELECT {_TEMPLATE_COLUMNS} FROM prompt_templates WHERE scenario = ?",
                    (scenario,),
                )
        self._changed()
        return _template_from_row(next(iter(rows)))

    async def get_template(self, scenario: str) -> PromptTemplate | None:
        """The scenario's template (shared with later calls: it is frozen)."""
        if scenario in self._templates:
            return self._templates[scenario]
        rows = await self._db.reader.execute_fetchall(
            f"SELECT {_TEMPLATE_COLUMNS} FROM prompt_templates WHERE scenario = ?", (scenario,)
        )
        template = next((_template_from_row(row) for row in rows), None)
        if len(self._templates) >= READ_CACHE_ENTRIES:
            self._templates.clear()
        self._templates[scenario] = template
        return template

    async def list_templates(self) -> list[PromptTemplate]:
        rows = await self._db.reader.execute_fetchall(
            f"SELECT {_TEMPLATE_COLUMNS} FROM prompt_templates ORDER BY scenario"
        )
        return [_template_from_row(row) for row in rows]

    async def delete_template(self, scenario: str) -> bool:
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "DELETE FROM prompt_templates WHERE scenario = ?", (scenario,)
            )
        self._changed()
        return cursor.rowcount > 0

    # --- skills -------------------------------------------------------------------------

    async def upsert_skill(self, skill: Skill) -> Skill:
        """Create or replace the skill named ``skill.name``; the stored skill is returned
        (``updated_at`` moves only when something changed)."""
        if not skill.name:
            raise ValueError("a skill needs a name")
        apps = json.dumps(list(skill.apps), ensure_ascii=False)
        async with self._db.transaction() as conn:
            rows = await conn.execute_fetchall(
                f"INSERT INTO skills ({_SKILL_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (name) DO UPDATE SET description = excluded.description,"
                "  prompt = excluded.prompt, apps = excluded.apps, enabled = excluded.enabled,"
                "  updated_at = excluded.updated_at"
                " WHERE description IS NOT excluded.description"
                "  OR prompt IS NOT excluded.prompt OR apps IS NOT excluded.apps"
                "  OR enabled IS NOT excluded.enabled"
                f" RETURNING {_SKILL_COLUMNS}",
                (
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
                    f"SELECT {_SKILL_COLUMNS} FROM skills WHERE name = ?", (skill.name,)
                )
        self._changed()
        return _skill_from_row(next(iter(rows)))

    async def list_skills(self, app: str | None = None, enabled_only: bool = False) -> list[Skill]:
        """Skills by name. With ``app``, only those whose apps include it (ignoring ASCII
        case: "Excel" finds "excel") or whose apps list is empty (every app). The skills
        are shared with later calls (they are frozen)."""
        key = (app, enabled_only)
        cached = self._skills.get(key)
        if cached is not None:
            return list(cached)
        rows = await self._db.reader.execute_fetchall(
            f"SELECT {_SKILL_COLUMNS} FROM skills"
            " WHERE (? = 0 OR enabled = 1)"
            "  AND (? IS NULL OR json_array_length(apps) = 0"
            "   OR EXISTS (SELECT 1 FROM json_each(skills.apps) WHERE lower(value) = lower(?)))"
            " ORDER BY name",
            (int(enabled_only), app, app),
        )
        skills = [_skill_from_row(row) for row in rows]
        if len(self._skills) >= READ_CACHE_ENTRIES:
            self._skills.clear()
        self._skills[key] = tuple(skills)
        return skills

    async def delete_skill(self, name: str) -> bool:
        async with self._db.transaction() as conn:
            cursor = await conn.execute("DELETE FROM skills WHERE name = ?", (name,))
        self._changed()
        return cursor.rowcount > 0
