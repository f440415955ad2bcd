"""Finding a prompt template by a name in any case (the scenario named like a host)."""

from __future__ import annotations

from contextd.store.catalog import CatalogRepo
from contextd.store.engine.database import Database


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
