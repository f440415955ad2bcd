"""What the layers record, as a recorder that keeps nothing: the one a server without a
metrics port uses (``PrometheusRecorder`` overrides every method)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from contextd.core.pipeline import DroppedRange

# Told the seconds one statement took (the store's connections call it).
StatementObserver = Callable[[str, float], None]


class Recorder:
    """Records nothing."""

    enabled = False

    def chat_turn_ended(self, status: str) -> None:
        """A StreamChat turn ended with ``status`` (ok, error, cancelled, ...)."""

    def first_delta(self, seconds: float) -> None:
        """The first text delta of a turn, ``seconds`` after the turn began."""

    def model_call(
        self,
        system: str,
        model: str,
        seconds: float,
        error_type: str,
        input_tokens: int,
        output_tokens: int,
    ) -> None:
        """One model call ended; ``error_type`` "" when it succeeded."""

    def built(self, kept_tokens: int, dropped: Sequence[DroppedRange]) -> None:
        """A message list was built: ``kept_tokens`` in it, ``dropped`` history left out."""

    def memory_search(self, seconds: float, hits: int) -> None:
        """A memory search took ``seconds`` and found ``hits`` memories."""

    def statement_observer(self, engine: str) -> StatementObserver | None:
        """What times the statements of ``engine``; None: they are not timed at all."""
        return None


NULL_RECORDER = Recorder()
