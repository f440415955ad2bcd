"""API key strings: made random, read back only when well formed, checked by hash."""

from __future__ import annotations

import pytest
from contextd.core.api_keys import hash_secret, new_key, parse_key, secret_matches


def test_a_new_key_reads_back_and_matches_only_its_own_hash() -> None:
    key, other = new_key(), new_key()
    assert key != other
    assert parse_key(key.token) == key
    assert secret_matches(key.secret, hash_secret(key.secret))
    assert not secret_matches(other.secret, hash_secret(key.secret))
    assert key.secret not in hash_secret(key.secret)


@pytest.mark.parametrize(
    "token",
    ["", "garbage", "ctxd__x", "ctxd_0123456789ab_short", "CTXD_0123456789ab_" + "a" * 43],
)
def test_malformed_keys_do_not_parse(token: str) -> None:
    assert parse_key(token) is None
