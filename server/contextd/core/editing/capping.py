"""One tool result over the cap, kept to its head and its tail around a marker.

The marker says how much was left out: ``[... 1234 tokens (56 lines) of this tool
result left out ...]``. The head gets two thirds of the room, the tail the rest (the end
of an output often says how it went). Cuts fall on a line break when one is near,
else after a space or a JSON separator (``,`` ``]`` ``}``), so that a number, a word or a
JSON literal is never cut into a shorter one that reads as a value; only text with no
such break nearby (a base64 blob, say) is cut anywhere, and then never inside a
backslash escape. Python strings are cut by characters, so UTF-8 is never split.

The same text, cap and tokenizer always give the same bytes; results are memoized,
since a session's history sends the same results again on every step.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from contextd.core.tokens import TiktokenTokenizer, Tokenizer

_BREAKS = frozenset(" \t,;])}")
# A JSON escape is at most six characters (\uXXXX).
_ESCAPE = 6
_MEMO_ENTRIES = 512
_memo: dict[tuple[str, int, str], str] = {}
_memo_lock = threading.Lock()


def marker(tokens: int, lines: int) -> str:
    return f"[... {tokens} tokens ({lines} lines) of this tool result left out ...]"


def cap_text(text: str, cap: int, tok: Tokenizer) -> str | None:
    """``text`` within ``cap`` tokens (head, marker, tail), or None when it fits as it
    is."""
    if tok.count(text) <= cap:
        return None
    key = (tok.name, cap, text)
    found = _memo.get(key)
    if found is not None:
        return found
    capped = _capped(text, cap, tok)
    with _memo_lock:
        if len(_memo) >= _MEMO_ENTRIES:
            _memo.clear()
        _memo[key] = capped
    return capped


def _capped(text: str, cap: int, tok: Tokenizer) -> str:
    # The marker's numbers are at most these: its room is reserved for them.
    widest = "\n" + marker(tok.count(text), text.count("\n")) + "\n"
    room = max(cap - tok.count(widest), 2)
    while True:
        head_room = room * 2 // 3
        head_end = _clean_head(text, _prefix_chars(text, head_room, tok))
        rest = text[head_end:]
        tail_start = head_end + _clean_tail(
            rest, len(rest) - _suffix_chars(rest, room - head_room, tok)
        )
        head, middle, tail = text[:head_end], text[head_end:tail_start], text[tail_start:]
        # The marker on a line of its own, so that the head and the tail read back exactly.
        before = "\n" if head else ""
        after = "\n" if tail else ""
        capped = f"{head}{before}{marker(tok.count(middle), middle.count(chr(10)))}{after}{tail}"
        over = tok.count(capped) - cap
        # Tokens can merge differently across the joins: shrink and cut again.
        if over <= 0 or room <= 2:
            return capped
        room = max(room - over, 2)


def _prefix_chars(text: str, tokens: int, tok: Tokenizer) -> int:
    """How many leading characters of ``text`` fit in ``tokens``."""
    if isinstance(tok, TiktokenTokenizer):
        window = text[: tokens * 16 + 64]
        ids = tok.encoding.encode_ordinary(window)
        if len(ids) <= tokens:
            return len(window)
        kept = tok.encoding.decode_bytes(ids[:tokens])
        return len(kept.decode("utf-8", "ignore"))  # a character cut short is left out
    return _longest(len(text), tokens, lambda k: tok.count(text[:k]))


def _suffix_chars(text: str, tokens: int, tok: Tokenizer) -> int:
    """How many trailing characters of ``text`` fit in ``tokens``."""
    if isinstance(tok, TiktokenTokenizer):
        window = text[-(tokens * 16 + 64) :]
        ids = tok.encoding.encode_ordinary(window)
        if len(ids) <= tokens:
            return len(window)
        kept = tok.encoding.decode_bytes(ids[-tokens:])
        return len(kept.decode("utf-8", "ignore"))
    return _longest(len(text), tokens, lambda k: tok.count(text[len(text) - k :]))


def _longest(size: int, tokens: int, count: Callable[[int], int]) -> int:
    """The largest k <= size with count(k) <= tokens (count grows with k)."""
    lo, hi = 0, size
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(mid) <= tokens:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _clean_head(text: str, end: int) -> int:
    """``end`` moved back to just after a line break in the head's last quarter, else
    after a break in its last half, else before any escape it would cut."""
    if end >= len(text) or end == 0:
        return end
    newline = text.rfind("\n", end - end // 4, end)
    if newline >= 0:
        return newline + 1
    for k in range(end - 1, end // 2 - 1, -1):
        if text[k] in _BREAKS:
            return k + 1
    backslash = text.rfind("\\", max(end - _ESCAPE, 0), end)
    return backslash if backslash >= 0 else end


def _clean_tail(text: str, start: int) -> int:
    """``start`` moved on to just after a line break in the tail's first quarter, else
    after a break in its first half, else past any escape it would cut."""
    if start <= 0 or start >= len(text) or text[start - 1] == "\n":
        return start
    size = len(text) - start
    newline = text.find("\n", start, start + size // 4)
    if newline >= 0:
        return newline + 1
    for k in range(start, start + size // 2):
        if text[k] in _BREAKS:
            return k + 1
    backslash = text.rfind("\\", max(start - _ESCAPE + 1, 0), start)
    return min(backslash + _ESCAPE, len(text)) if backslash >= 0 else start
