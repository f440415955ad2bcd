"""Shared fixtures of the benchmarks: realistic chat texts, a table printer, the RESULT line.

Every text here is deterministic: the short conversation is written out, the long
history comes from a seeded ``random.Random``. Nothing is downloaded.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import statistics
import sys
from collections.abc import Sequence

SYSTEM_PROMPT = (
    "You are Atlas, a careful senior software engineer helping a developer on a Python "
    "gRPC service. Answer concisely, show code when it helps, and say so when you are "
    "not sure. Never invent APIs; prefer the standard library."
)

# 20 short turns, user first, as a developer's chat with an assistant reads.
SHORT_HISTORY: tuple[tuple[str, str], ...] = (
    ("user", "Hi! My gRPC server in Python gets slow under load. Where should I start?"),
    (
        "assistant",
        "Start by measuring: count calls per second and p50/p99 latency at a fixed "
        "concurrency, then profile the server process with py-spy while the load runs.",
    ),
    ("user", "I'm using grpc.aio. Is the event loop the bottleneck?"),
    (
        "assistant",
        "Often, yes. One asyncio loop runs every handler on one core, so any CPU "
        "work in a handler delays all other calls. Check whether handlers await or compute.",
    ),
    ("user", "They mostly compute: tokenizing text with tiktoken."),
    (
        "assistant",
        "tiktoken is fast (Rust), but calling it per message still costs a few "
        "microseconds each. Count only what you need and cache counts for repeated texts.",
    ),
    ("user", "Would a thread pool help?"),
    (
        "assistant",
        "Only if the work releases the GIL. tiktoken's encode does for long texts; "
        "for short ones the hand-off costs more than it saves. Measure both.",
    ),
    ("user", "OK. What about protobuf parsing, is that expensive?"),
    (
        "assistant",
        "With the upb backend it is cheap: a few microseconds for a request of a "
        "few kilobytes. Converting messages to Python objects field by field costs more.",
    ),
    ("user", "Can you show me how to time one handler?"),
    (
        "assistant",
        "Wrap it: `t = time.perf_counter(); resp = await handler(req, ctx); "
        "log.info('rpc', extra={'ms': (time.perf_counter() - t) * 1e3})`.",
    ),
    ("user", "Thanks. Does logging every call slow things down?"),
    (
        "assistant",
        "A JSON log line per call costs tens of microseconds in Python. At a few "
        "thousand calls per second that is noticeable; sample or raise the level if needed.",
    ),
    ("user", "Makes sense. How many concurrent RPCs should I allow?"),
    (
        "assistant",
        "Enough to keep the loop busy but bounded, so overload fails fast: a few "
        "hundred is typical. Set maximum_concurrent_rpcs and watch RESOURCE_EXHAUSTED.",
    ),
    ("user", "Last one: how do I compare against a baseline fairly?"),
    (
        "assistant",
        "Run both sides in the same process and session, alternate rounds A, B, "
        "A, B, and compare medians, so machine noise hits both sides alike.",
    ),
    ("user", "Great, I'll write that benchmark now."),
    (
        "assistant",
        "Good plan. Keep the request identical on both sides and check the "
        "results are correct before you time anything.",
    ),
)

USER_MESSAGE = "Here is my benchmark script. Can you review it and tell me what it misses?"

_TOPICS = (
    "the deployment pipeline",
    "our Postgres migration",
    "the React dashboard",
    "a flaky integration test",
    "the billing webhook",
    "rate limiting in the API gateway",
    "the Kubernetes liveness probe",
    "memory growth in the worker",
    "the search index",
    "TLS certificate rotation",
    "the mobile push service",
    "the CSV import job",
    "Redis cache invalidation",
    "the OAuth login flow",
    "our Terraform modules",
    "the nightly ETL",
    "p99 latency of checkout",
    "the feature-flag service",
)
_QUESTIONS = (
    "Can you explain why {t} fails only on Mondays?",
    "What is the simplest way to make {t} idempotent?",
    "I think {t} leaks file descriptors. How do I confirm it?",
    "How would you test {t} without hitting production?",
    "Quick one: is it safe to retry {t} after a timeout?",
    "We need to cut the cost of {t} by half. Ideas?",
    "Could you review this approach for {t}? I'm worried about race conditions.",
    "Why does {t} log 'connection reset by peer' every few minutes?",
    "Is there a way to roll back {t} without downtime?",
    "Résumé rapide : comment surveiller {t} ?",
    "Kurze Frage: warum ist {t} so langsam?",
    "thanks!! that fixed {t} 🎉 one more thing though",
)
_SENTENCES = (
    "First, reproduce the problem with the smallest input you can find.",
    "The root cause is usually a shared connection that is not returned to the pool.",
    "Add a unique key to each request and reject duplicates on the server side.",
    "Retries are safe only when the operation is idempotent or carries a request id.",
    "Measure before you optimise: profile under realistic load, not on an idle laptop.",
    "A circuit breaker keeps one slow dependency from taking the whole service down.",
    "Prefer structured logs with a request id so that one failure can be traced end to end.",
    "Set explicit timeouts on every network call; the defaults are often infinite.",
    "Run the migration in two steps: add the new column, backfill, then drop the old one.",
    "Use exponential backoff with jitter so that clients do not retry in lockstep.",
    "Check the container's memory limit; the kernel OOM killer leaves few traces.",
    "Pin dependency versions and update them deliberately, one at a time.",
    "Feature flags let you ship the code dark and enable it for a few users first.",
    "If the test is flaky, look for hidden ordering, shared state or wall-clock time.",
    "Batch the writes: one round trip for a hundred rows beats a hundred round trips.",
    "Cache the result with a short TTL and invalidate it on write.",
    "Rotate the certificate before it expires and alert thirty days ahead.",
    "Keep the handler small and move the business rules into plain functions you can test.",
)
_CODE = (
    "```python\nfor attempt in range(5):\n    try:\n        return call()\n"
    "    except TimeoutError:\n        time.sleep(min(30, 2 ** attempt) * random.random())\n"
    "raise RuntimeError('gave up')\n```",
    "```sql\nALTER TABLE orders ADD COLUMN status_v2 text;\n"
    "UPDATE orders SET status_v2 = status WHERE status_v2 IS NULL;\n```",
    "```bash\nkubectl logs deploy/worker --since=1h | grep -c 'reset by peer'\n```",
    "```yaml\nlivenessProbe:\n  grpc:\n    port: 50151\n  periodSeconds: 10\n"
    "  failureThreshold: 3\n```",
)


def long_history(n: int, seed: int = 20261121) -> list[tuple[str, str]]:
    """``n`` alternating (role, text) turns, user first, of varied length and style."""
    rng = random.Random(seed)
    turns: list[tuple[str, str]] = []
    for i in range(n):
        topic = rng.choice(_TOPICS)
        if i % 2 == 0:
            text = rng.choice(_QUESTIONS).format(t=topic)
            if rng.random() < 0.3:
                text += " " + " ".join(rng.sample(_SENTENCES, rng.randint(1, 3)))
            turns.append(("user", text))
            continue
        shape = rng.random()
        if shape < 0.25:  # short acknowledgement
            text = (
                rng.choice(("Sure.", "Yes, that works.", "Good question."))
                + " "
                + rng.choice(_SENTENCES)
            )
        else:
            parts = [f"About {topic}:"]
            parts += rng.sample(_SENTENCES, rng.randint(2, 7))
            if shape > 0.8:
                parts.append(rng.choice(_CODE))
            if rng.random() < 0.3:
                steps = rng.sample(_SENTENCES, 3)
                parts.append("\n".join(f"{k}. {s}" for k, s in enumerate(steps, 1)))
            text = " ".join(parts)
        turns.append(("assistant", text))
    return turns


async def stdin_closed() -> None:
    """Returns once the parent closes this child's stdin, the benchmarks' stop signal."""
    await asyncio.to_thread(sys.stdin.read)


def free_port() -> int:
    """A local TCP port free at the time of asking (for a server child's extra port)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def machine_note() -> str:
    """CPU count and load average: how busy the (shared) machine was when the run started."""
    try:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "n/a"
    return f"machine: {os.cpu_count()} CPUs, load average {load}"


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    print(line)
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print(
            "  ".join(
                c.rjust(w) if i else c.ljust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )


def result_line(name: str, ratio: float, target: float, passed: bool) -> str:
    return f"RESULT {name} ratio={ratio:.2f} target={target:g} {'PASS' if passed else 'FAIL'}"
