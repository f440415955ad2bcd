"""Who a credential says the caller is, once a credential was checked.

Made at the edge (fronts/grpc/) from an API key or a token and nothing else; below
fronts/grpc/ only this value travels, never the credential.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_TENANT = "default"

# A tenant id names a directory of event logs (store/event_log/files.py), so it is a plain
# name: no separator, no leading dot ("..", hidden files), nothing a path could interpret.
_TENANT_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}")
TENANT_ID_RULE = "1-128 letters, digits, '_', '-' or '.', not starting with '.'"


def is_tenant_id(value: str) -> bool:
    """True when ``value`` is a well-formed tenant id (see ``TENANT_ID_RULE``)."""
    return _TENANT_ID.fullmatch(value) is not None


def check_tenant_id(tenant_id: str) -> None:
    """The default tenant, or a well-formed tenant id; ValueError otherwise."""
    if tenant_id != DEFAULT_TENANT and not is_tenant_id(tenant_id):
        raise ValueError(f"tenant_id: {TENANT_ID_RULE}, got {tenant_id!r}")


def tenant_dir_name(tenant_id: str) -> str:
    """The name of a well-formed tenant id's directory, one no other tenant's can equal
    even where the filesystem ignores case (macOS, Windows: "Acme" and "acme" are two
    tenants, never one directory). Every name is lowercase: an id without capitals is
    its own name; one with capitals is lowercased, then "~" and the capitals' positions
    as a hexadecimal bit mask ("Acme" -> "acme~1"). No tenant id holds "~", so no
    lowercase id is named like that."""
    mask = sum(1 << i for i, c in enumerate(tenant_id) if "A" <= c <= "Z")
    return f"{tenant_id.lower()}~{mask:x}" if mask else tenant_id


@dataclass(frozen=True, slots=True)
class Identity:
    user_id: str
    tenant_id: str = DEFAULT_TENANT
    # A service credential (an add-in's backend) may act for any user of its tenant.
    service: bool = False
    # What logs may name: an API key's public id or a token's subject, never a secret.
    credential_id: str = ""
