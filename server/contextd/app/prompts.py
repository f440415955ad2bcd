"""Prompt templates (one per scenario) and skills, per tenant.

The default tenant's are the server-wide defaults, which every tenant reads unless it
wrote its own of the same name (store/catalog.py); a tenant changes only its own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from contextd.core.errors import InvalidArgument, NotFound, Violations, shown
from contextd.core.pipeline import is_blank
from contextd.core.system_prompt import NO_SCENARIO
from contextd.store.catalog import CatalogRepo
from contextd.store.models import PromptTemplate, Skill

_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
MAX_PROMPT_CHARS = 100_000


class PromptsApp:
    def __init__(self, catalog: CatalogRepo) -> None:
        self.catalog = catalog

    async def upsert_template(
        self, tenant_id: str, scenario: str, system_prompt: str, enabled: bool
    ) -> PromptTemplate:
        v = Violations()
        if not _NAME.fullmatch(scenario):
            v.add("scenario", "1-64 letters, digits, '_', '-' or '.'")
        elif scenario == NO_SCENARIO:
            v.add("scenario", f"{NO_SCENARIO!r} means no scenario and cannot have a template")
        if is_blank(system_prompt):
            v.add("system_prompt", "a template needs text")
        elif len(system_prompt) > MAX_PROMPT_CHARS:
            v.add("system_prompt", f"at most {MAX_PROMPT_CHARS} characters")
        v.raise_if_any()
        return await self.catalog.upsert_template(
            scenario, system_prompt, enabled, tenant_id=tenant_id
        )

    async def list_templates(self, tenant_id: str) -> list[PromptTemplate]:
        return await self.catalog.list_templates(tenant_id=tenant_id)

    async def delete_template(self, tenant_id: str, scenario: str) -> None:
        if not scenario:
            raise InvalidArgument.one("scenario", "required")
        if not await self.catalog.delete_template(scenario, tenant_id=tenant_id):
            raise NotFound(f"no template for scenario {shown(scenario)}")

    async def upsert_skill(self, tenant_id: str, skill: Skill) -> Skill:
        v = Violations()
        if not _NAME.fullmatch(skill.name):
            v.add("skill.name", "1-64 letters, digits, '_', '-' or '.'")
        if is_blank(skill.prompt) and is_blank(skill.description):
            v.add("skill.prompt", "a skill needs a prompt or a description")
        if len(skill.prompt) > MAX_PROMPT_CHARS:
            v.add("skill.prompt", f"at most {MAX_PROMPT_CHARS} characters")
        for i, app in enumerate(skill.apps):
            if not _NAME.fullmatch(app):
                v.add(f"skill.apps[{i}]", "1-64 letters, digits, '_', '-' or '.'")
        v.raise_if_any()
        return await self.catalog.upsert_skill(
            replace(skill, apps=tuple(a.lower() for a in skill.apps)), tenant_id=tenant_id
        )

    async def list_skills(self, tenant_id: str, app: str, enabled_only: bool) -> Sequence[Skill]:
        return await self.catalog.list_skills(
            app.lower() or None, enabled_only, tenant_id=tenant_id
        )

    async def delete_skill(self, tenant_id: str, name: str) -> None:
        if not name:
            raise InvalidArgument.one("name", "required")
        if not await self.catalog.delete_skill(name, tenant_id=tenant_id):
            raise NotFound(f"no skill named {shown(name)}")
