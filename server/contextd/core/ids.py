"""Ids as callers see them: the form every id of a request must have, and the opaque
strings that stand for the store's message and memory row numbers.

The store numbers messages and memories 1, 2, 3...; a caller never sees those numbers.
Each is shown as one AES block (a keyed permutation of 128-bit values) of its kind and
number, in URL-safe base64: 22 characters that say nothing of the number, of how many
rows there are, or of which ids exist, and that nobody without the key can make. Seven
zero bytes in the block are the check: a string that was not made with the key decodes
to a valid id with a chance of 2^-56. The kind is in the block too, so a memory's id
never names a message. The key is the deployment's (store/server_secrets.py), shared by
every replica on one database.
"""

from __future__ import annotations

import base64
import binascii
import re
from enum import IntEnum

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

# Every id a request names (session, message, memory): what the server gives out fits
# it with room to spare (a session's is 32 hex digits, a message's or memory's 22
# characters); anything else is refused as INVALID_ARGUMENT before it is looked up.
_ID_FORM = re.compile(r"[A-Za-z0-9_-]{1,64}")
ID_FORM_RULE = "at most 64 letters, digits, '_' or '-'"

KEY_BYTES = 32
# Ids encoded lately, per kind: a session's build shows the same messages turn after
# turn, and a look-up costs a sixth of an encoding. Emptied when full.
_REMEMBERED = 16384
_CHECK = bytes(7)
_ENCODED_CHARS = 22  # 16 bytes of base64 without its padding


def is_id_form(value: str) -> bool:
    """Whether ``value`` has the form of an id (see ``ID_FORM_RULE``)."""
    return _ID_FORM.fullmatch(value) is not None


class IdKind(IntEnum):
    MESSAGE = 1
    MEMORY = 2
    COMPRESSION_SUMMARY = 3
    MEMORY_CHANGE = 4  # a row of a memory's history


class OpaqueIds:
    """Row numbers <-> the strings callers see, under one key."""

    __slots__ = ("_decrypt", "_encoded", "_encrypt")

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise ValueError(f"the id key must be {KEY_BYTES} bytes")
        cipher = Cipher(algorithms.AES(key), modes.ECB())
        # One block at a time through long-lived contexts: ECB keeps no state between
        # blocks, and a context costs a twentieth of making a new one per id. Each
        # update() runs whole under the GIL.
        self._encrypt = cipher.encryptor()
        self._decrypt = cipher.decryptor()
        self._encoded: dict[IdKind, dict[int, str]] = {kind: {} for kind in IdKind}

    def encode(self, kind: IdKind, number: int) -> str:
        """The caller's string for row ``number`` (0 < number < 2**63) of ``kind``."""
        encoded = self._encoded[kind]
        text = encoded.get(number)
        if text is None:
            if len(encoded) >= _REMEMBERED:
                encoded.clear()
            block = bytes((kind,)) + _CHECK + number.to_bytes(8, "big")
            data = self._encrypt.update(block)
            text = encoded[number] = base64.urlsafe_b64encode(data).decode("ascii")[:22]
        return text

    def decode(self, kind: IdKind, text: str) -> int | None:
        """The row number ``text`` stands for; None when it is not a string ``encode``
        made for ``kind`` with this key (another kind, another deployment, a forgery,
        a number as ids were once given out)."""
        if len(text) != _ENCODED_CHARS:
            return None
        try:
            data = base64.urlsafe_b64decode(text + "==")
        except (binascii.Error, ValueError):
            return None
        # Base64 has two spellings of the last 4 bits: only the one encode() makes counts.
        if base64.urlsafe_b64encode(data).decode("ascii")[:22] != text:
            return None
        block = self._decrypt.update(data)
        if block[0] != kind or block[1:8] != _CHECK:
            return None
        number = int.from_bytes(block[8:], "big")
        return number if 0 < number < 2**63 else None
