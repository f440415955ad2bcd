"""Where each field of the native request came from in the HTTP request, so that a
field the native server refuses (``messages[2].tool_calls[0].name``) is reported under
the name the caller used (``messages[3].tool_calls[0].function.name``)."""

from __future__ import annotations


class ParamMap:
    """Native field paths to the request's parameter paths, by prefix."""

    def __init__(self) -> None:
        self._pairs: list[tuple[str, str]] = []

    def add(self, native: str, param: str) -> None:
        self._pairs.append((native, param))

    def translate(self, native: str) -> str | None:
        """The parameter of the longest recorded prefix of ``native``, with the rest of
        the path appended; None when nothing recorded covers it."""
        best: tuple[str, str] | None = None
        for prefix, param in self._pairs:
            if _covers(prefix, native) and (best is None or len(prefix) > len(best[0])):
                best = (prefix, param)
        if best is None:
            return None
        prefix, param = best
        return param + native[len(prefix) :]


def _covers(prefix: str, path: str) -> bool:
    """``messages[1]`` covers ``messages[1].content`` but not ``messages[10]``."""
    return path == prefix or (path.startswith(prefix) and path[len(prefix)] in ".[")
