"""The recorder with a metrics port: every metric in a registry of the server's own, so
that several servers in one process (tests) keep theirs apart."""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterable, Sequence

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.metrics_core import CounterMetricFamily, Metric

from contextd.core.pipeline import DroppedRange
from contextd.metrics.across import Across
from contextd.metrics.loop_counter import LoopCounter, LoopCounterChild
from contextd.metrics.loop_histogram import LoopHistogram, LoopHistogramChild
from contextd.metrics.recorder import Recorder, StatementObserver

# The bucket boundaries the GenAI semantic conventions ask for.
_GEN_AI_SECONDS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48)
_GEN_AI_TOKENS = tuple(float(4**n) for n in range(14))  # 1, 4, 16, ... 67108864
_TURN_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_SHORT_SECONDS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 1)
_TOKENS = tuple(float(4**n) for n in range(2, 11))  # 16 ... 1048576


class RpcMeter:
    """One method's gRPC metrics, with the label values resolved once."""

    __slots__ = ("_by_code", "_handled", "_labels", "handling", "started")

    def __init__(self, metrics: GrpcMetrics, labels: tuple[str, str, str]) -> None:
        self._labels = labels
        self._handled = metrics.handled
        self._by_code: dict[str, LoopCounterChild] = {}
        self.started = metrics.started.labels(*labels)
        self.handling = metrics.handling.labels(*labels)

    def handled(self, code: str) -> LoopCounterChild:
        found = self._by_code.get(code)
        if found is None:
            found = self._by_code[code] = self._handled.labels(*self._labels, code)
        return found


class GrpcMetrics:
    """The names and labels of go-grpc-prometheus, so that its dashboards work."""

    def __init__(self, registry: CollectorRegistry) -> None:
        labels = ("grpc_type", "grpc_service", "grpc_method")
        # Each once per call, on the loop's thread: the cheaper kind.
        self.started = LoopCounter("grpc_server_started", "RPCs started on the server.", labels)
        registry.register(self.started)
        self.handled = LoopCounter(
            "grpc_server_handled",
            "RPCs completed on the server, by status code.",
            (*labels, "grpc_code"),
        )
        registry.register(self.handled)
        self.handling = LoopHistogram(
            "grpc_server_handling_seconds",
            "Seconds from an RPC's start to its end (its last message for a stream).",
            labels,
            Histogram.DEFAULT_BUCKETS[:-1],  # the +Inf bucket is always there
        )
        registry.register(self.handling)

    def meter(self, full_method: str, grpc_type: str) -> RpcMeter:
        service, _, method = full_method.strip("/").rpartition("/")
        return RpcMeter(self, (grpc_type, service, method))


class PrometheusRecorder(Recorder):
    enabled = True

    def __init__(self, version: str) -> None:
        # No ``_created`` series beside each counter: go-grpc-prometheus has none, and
        # they double what a scrape carries.
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = registry = CollectorRegistry(auto_describe=True)
        # How a family adds up across workers, by name, where it is not a sum (across.py).
        self.across: dict[str, Across] = {"contextd_build_info": Across.SAME}
        self.grpc = GrpcMetrics(registry)
        info = Gauge(
            "contextd_build_info",
            "Always 1; the labels say which contextd runs on which Python.",
            ("version", "python"),
            registry=registry,
        )
        info.labels(version, platform.python_version()).set(1)
        self._turns = Counter(
            "contextd_chat_turns",
            "StreamChat turns ended, by status.",
            ("status",),
            registry=registry,
        )
        self._first_delta = Histogram(
            "contextd_chat_first_delta_seconds",
            "Seconds from a StreamChat turn's start to its first text delta.",
            buckets=_TURN_SECONDS,
            registry=registry,
        )
        gen_ai = ("gen_ai_operation_name", "gen_ai_system", "gen_ai_request_model")
        self._model_seconds = Histogram(
            "gen_ai_client_operation_duration_seconds",
            "Seconds a model call took, as gen_ai.client.operation.duration.",
            (*gen_ai, "error_type"),
            buckets=_GEN_AI_SECONDS,
            registry=registry,
        )
        self._model_tokens = Histogram(
            "gen_ai_client_token_usage",
            "Tokens of a model call, as gen_ai.client.token.usage.",
            (*gen_ai, "gen_ai_token_type"),
            buckets=_GEN_AI_TOKENS,
            registry=registry,
        )
        kept = LoopHistogram(
            "contextd_build_kept_tokens",
            "Tokens of the message lists BuildMessages built.",
            (),
            _TOKENS,
        )
        registry.register(kept)
        self._kept = kept.labels()
        # With every build that leaves messages out, on the loop's thread.
        self._dropped = LoopCounter(
            "contextd_build_dropped_messages",
            "History messages left out of built message lists, by reason.",
            ("reason",),
        )
        registry.register(self._dropped)
        self._search_seconds = Histogram(
            "contextd_memory_search_seconds",
            "Seconds a memory search took.",
            buckets=_SHORT_SECONDS,
            registry=registry,
        )
        self._search_hits = Histogram(
            "contextd_memory_search_hits",
            "Memories a search found.",
            buckets=(0, 1, 2, 5, 10, 20, 50, 100),
            registry=registry,
        )
        self._web_calls = Counter(
            "contextd_web_requests",
            "Calls on the web port, by protocol and the status they were answered with "
            "(those forwarded are in the grpc_server_ metrics too).",
            ("protocol", "grpc_code"),
            registry=registry,
        )
        # On the loop's thread with every SQLite statement: the cheaper kind.
        self._statements = LoopHistogram(
            "contextd_store_statement_seconds",
            "Seconds a database statement took, by engine and statement kind.",
            ("engine", "statement"),
            _SHORT_SECONDS,
        )
        registry.register(self._statements)

    def chat_turn_ended(self, status: str) -> None:
        self._turns.labels(status).inc()

    def first_delta(self, seconds: float) -> None:
        self._first_delta.observe(seconds)

    def model_call(
        self,
        system: str,
        model: str,
        seconds: float,
        error_type: str,
        input_tokens: int,
        output_tokens: int,
    ) -> None:
        self._model_seconds.labels("chat", system, model, error_type).observe(seconds)
        if input_tokens:
            self._model_tokens.labels("chat", system, model, "input").observe(input_tokens)
        if output_tokens:
            self._model_tokens.labels("chat", system, model, "output").observe(output_tokens)

    def built(self, kept_tokens: int, dropped: Sequence[DroppedRange]) -> None:
        self._kept.observe(kept_tokens)
        for gap in dropped:
            self._dropped.labels(gap.reason.value).inc(gap.count)

    def memory_search(self, seconds: float, hits: int) -> None:
        self._search_seconds.observe(seconds)
        self._search_hits.observe(hits)

    def web_call(self, protocol: str, code: str) -> None:
        self._web_calls.labels(protocol, code).inc()

    def statement_observer(self, engine: str) -> StatementObserver:
        histogram = self._statements
        # By SQL text: a repository's statements are constants, so this stays small.
        children: dict[str, LoopHistogramChild] = {}

        def observe(sql: str, seconds: float) -> None:
            child = children.get(sql)
            if child is None:
                kind = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else "EMPTY"
                child = children[sql] = histogram.labels(engine, kind)
            child.observe(seconds)

        return observe

    def gauge(
        self,
        name: str,
        documentation: str,
        read: Callable[[], float],
        across: Across = Across.SUM,
    ) -> None:
        """A gauge read when scraped; ``across``: how the workers' readings add up."""
        Gauge(name, documentation, registry=self.registry).set_function(read)
        if across is not Across.SUM:
            self.across[name] = across

    def counter(self, name: str, documentation: str, read: Callable[[], float]) -> None:
        """A counter whose total is read when scraped."""
        self.registry.register(_ReadCounter(name, documentation, read))


class _ReadCounter:
    """A counter kept elsewhere (a plain int), read at each scrape."""

    def __init__(self, name: str, documentation: str, read: Callable[[], float]) -> None:
        self._name = name
        self._documentation = documentation
        self._read = read

    def collect(self) -> Iterable[Metric]:
        yield CounterMetricFamily(self._name, self._documentation, value=self._read())
