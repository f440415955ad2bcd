"""Who a credential says the caller is, once a credential was checked.

Made at the edge (api/) from an API key or a token and nothing else; below api/ only
this value travels, never the credential.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_TENANT = "default"


@dataclass(frozen=True, slots=True)
class Identity:
    user_id: str
    tenant_id: str = DEFAULT_TENANT
    # A service credential (an add-in's backend) may act for any user of its tenant.
    service: bool = False
    # What logs may name: an API key's public id or a token's subject, never a secret.
    credential_id: str = ""
