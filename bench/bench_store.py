"""Store benchmark: importing, embedding and searching a library of generated skills.

    python -m bench.bench_store            # 50,000 skills (about the paper's 45.8k library)
    python -m bench.bench_store --n 2000   # a quick run

Each figure is printed beside its baseline, measured in the same run:
  import     batched transactions (and one durability barrier per batch) vs one commit per skill
  embedding  one skill per call vs batches of 4 to 64 (skills per second), and where a call's time goes;
             the model's work in GFLOP/s against ONNX Runtime's own matrix product on the same threads
  retrieval  every skill embedded for real (a progress bar; --random-vectors skips it for a quick run)
             top-5 from the in-memory matrix vs recomputing from the database rows
Baselines that would take too long at full size run on a sample and are extrapolated; the
output says so wherever it happens.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from skillgraft.skills import Store
from skillgraft.skills.embedder import BATCH, MiniLMEmbedder, embedding_key, minilm_path, skill_text
from sqlmodel import func, select

from skillgraft.skills.schema import Embedding, SkillVersion

VERBS = "fix debug speed-up migrate test refactor profile secure package document deploy parse".split()
NOUNS = ("imports config cache schema fixtures regex retries memory layout logging threads sockets "
         "queries auth builds wheels docker json csv dates unicode paths signals timeouts").split()
WORDS = ("error failure slow flaky missing wrong leak crash timeout conflict mismatch encoding permission "
         "deadlock overflow version dependency environment variable module function class test build").split()


def p95(samples: list[float]) -> float:
    return float(np.percentile(samples, 95))


def generate(root: Path, n: int, seed: int = 0) -> list[tuple[str, str]]:
    """Writes n skill folders; returns (name, a query that should find it) for each."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        verb, noun = rng.choice(VERBS), rng.choice(NOUNS)
        name = f"{verb}-{noun}-{i}"
        words = rng.sample(WORDS, 4)
        ident = f"{noun}_{verb.replace('-', '_')}_{i}"
        description = f"How to {verb.replace('-', ' ')} {noun} when you see {words[0]} or {words[1]} errors"
        body = (f"# {verb} {noun}\n\n1. Reproduce the {words[2]} with `pytest -k {noun}`.\n"
                f"2. Inspect `{ident}()` for {words[3]} problems.\n3. Apply the fix and rerun the tests.\n")
        folder = root / name
        (folder / "scripts").mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}")
        (folder / "scripts" / "check.sh").write_text(f"#!/bin/sh\npytest -k {noun} -q  # {ident}\n")
        out.append((name, f"{ident} raises {words[0]}"))
    return out


def bench_import(work: Path, tree: Path, n: int, sample: int, batch: int) -> Store:
    print(f"\n== import {n:,} skills (rows + files) ==")
    store = Store(f"sqlite:///{work / 'batched' / 'store.db'}", work / "batched" / "artifacts")
    t0, c0 = time.perf_counter(), time.process_time()
    reports = store.import_tree(tree, batch=batch)
    batched, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert sum(r.status == "created" for r in reports) == n, "every generated skill must import"

    sample_tree = work / "sample-tree"
    sample_tree.mkdir()
    for folder in sorted(tree.iterdir())[:sample]:
        shutil.copytree(folder, sample_tree / folder.name)
    single = Store(f"sqlite:///{work / 'single' / 'store.db'}", work / "single" / "artifacts")
    t0 = time.perf_counter()
    single.import_tree(sample_tree, batch=1)
    per_skill = (time.perf_counter() - t0) / sample
    single.close()
    baseline = per_skill * n
    print(f"batched ({batch} skills per transaction): {batched:8.1f} s  ({n / batched:,.0f} skills/s)   goal <= 60 s: "
          f"{'met' if batched <= 60 else 'NOT met'}   [process CPU time {cpu:.1f} s; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs]")
    print(f"one commit per skill:                  {baseline:8.1f} s  ({1 / per_skill:,.0f} skills/s)   "
          f"[measured on {sample:,} skills, extrapolated to {n:,}]")
    print(f"speed-up: {baseline / batched:.1f}x")
    return store


def encoder_flops(config: dict, tokens: int) -> int:
    """Floating-point operations of one text of `tokens` tokens through a BERT-style encoder's layers:
    the four attention projections, the two feed-forward products and the attention itself."""
    d, ffn, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    return layers * (2 * tokens * (4 * d * d + 2 * d * ffn) + 4 * tokens * tokens * d)


def matmul_rate(threads: int, d: int, ffn: int, repeats: int = 20) -> float:
    """The best GFLOP/s ONNX Runtime's own matrix product reaches here at the encoder's largest
    shape (rows × d times d × ffn), on the embedder's threads: what the model's work could run at
    if nothing but that product were done, however many texts a call held."""
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((d, ffn), dtype=np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "matmul",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, d])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, ffn])], initializer=[weight])
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    session = onnxruntime.InferenceSession(helper.make_model(graph).SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    best = 0.0
    for rows in (128, 512, 2048):
        x = rng.standard_normal((rows, d), dtype=np.float32)
        session.run(None, {"x": x})
        t0 = time.perf_counter()
        for _ in range(repeats):
            session.run(None, {"x": x})
        best = max(best, 2 * rows * d * ffn * repeats / (time.perf_counter() - t0) / 1e9)
    return best


def bench_embedding(store: Store, embedder: MiniLMEmbedder, sample: int, single_sample: int) -> float:
    """Texts per second one at a time and at several batch sizes; returns the rate at the store's BATCH."""
    print("\n== embedding (all-MiniLM-L6-v2 on ONNX Runtime, CPU) ==")
    versions = store.latest_versions()[:sample]
    texts = [skill_text(v.skill_name, v.description, v.body) for v in versions]
    embedder.encode(texts[:8])  # load the model outside the timings
    session, tokenizer = embedder._load()
    tokens = [len(e.ids) for e in tokenizer.encode_batch(texts)]
    config = json.loads((minilm_path() / "config.json").read_text())
    work = [encoder_flops(config, n) for n in tokens]  # the real tokens only, not the padding
    t0 = time.perf_counter()
    for t in texts[:single_sample]:
        embedder.encode([t])
    seconds = time.perf_counter() - t0
    single_rate, single_gflops = single_sample / seconds, sum(work[:single_sample]) / seconds / 1e9
    print(f"one skill per call:  {single_rate:7.1f} skills/s   [{single_sample:,} skills, {statistics.mean(tokens):.0f} tokens each]"
          f"   {single_gflops:5.1f} GFLOP/s")
    rates, best_gflops = {}, single_gflops
    for size in sorted({4, BATCH, 16, 64}):
        t0 = time.perf_counter()
        embedder.encode(texts, batch_size=size)
        seconds = time.perf_counter() - t0
        rates[size], gflops = len(texts) / seconds, sum(work) / seconds / 1e9
        best_gflops = max(best_gflops, gflops)
        print(f"{size:3d} per call:         {rates[size]:7.1f} skills/s   ({rates[size] / single_rate:.2f}x one per call)"
              f"   {gflops:5.1f} GFLOP/s" + ("   <- the store's batch size" if size == BATCH else ""))
    # The ceiling on batching: the model's work at the rate of its largest product alone.
    threads = session.get_session_options().intra_op_num_threads
    ceiling = matmul_rate(threads, config["hidden_size"], config["intermediate_size"])
    print(f"ceiling: ONNX Runtime's matrix product alone, {config['hidden_size']}x{config['intermediate_size']} weights, "
          f"{threads} threads: {ceiling:5.1f} GFLOP/s. One skill per call already runs at {100 * single_gflops / ceiling:.0f}% "
          f"of it (the best batch at {100 * best_gflops / ceiling:.0f}%): even a batch whose every product ran at that rate "
          f"would be only {ceiling / single_gflops:.1f}x faster than one per call on this machine")
    # Where the time of one call goes: tokenising and padding against the model itself.
    chunk = texts[:BATCH]
    t0 = time.perf_counter()
    encoded = tokenizer.encode_batch(chunk)
    ids = np.array([e.ids for e in encoded], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
    t1 = time.perf_counter()
    session.run(None, {"input_ids": ids, "attention_mask": mask})
    t2 = time.perf_counter()
    print(f"one call of {BATCH}: tokenising and padding {1e3 * (t1 - t0):.1f} ms, the model {1e3 * (t2 - t1):.1f} ms "
          f"(padded to {ids.shape[1]} tokens, {100 * (1 - mask.mean()):.0f}% padding)")
    store.retriever.embed_texts(texts)  # into the store's cache (not timed: the sweep above was)
    t0 = time.perf_counter()
    store.retriever.embed_texts(texts)
    cached_rate = len(texts) / (time.perf_counter() - t0)
    print(f"already cached (read back from the store): {cached_rate:,.0f} skills/s")
    return rates[BATCH]


def fill_vectors(store: Store, embed_all: bool, rate: float) -> None:
    """Gives every skill a cached embedding so retrieval can be timed over the whole library."""
    versions = store.latest_versions()
    texts = [skill_text(v.skill_name, v.description, v.body) for v in versions]
    model = store.retriever.embedder.name
    if embed_all:
        t0 = time.perf_counter()
        with Progress(TextColumn("embedding every skill"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      TimeRemainingColumn(), transient=True) as bar:
            task = bar.add_task("embed", total=len(texts))
            store.retriever.embed_texts(texts, progress=lambda n: bar.advance(task, n))
        print(f"embedded all {len(texts):,} skills for real in {time.perf_counter() - t0:.0f} s")
        return
    keys = [embedding_key(model, t) for t in texts]
    with store.db.read() as s:
        have = {k for (k,) in s.exec(Embedding.__table__.select().with_only_columns(Embedding.content_hash))}
    rng = np.random.default_rng(0)
    missing = [k for k in keys if k not in have]
    for i in range(0, len(missing), 5000):
        chunk = missing[i : i + 5000]
        vectors = rng.standard_normal((len(chunk), 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        store.retriever._store_vectors(model, dict(zip(chunk, vectors)))
    print(f"{len(have):,} skills embedded for real; {len(missing):,} given random unit vectors so search can be "
          f"timed at full size (embedding them all would take ~{len(missing) / rate / 60:.0f} min). "
          "The matrix product and top-k cost the same whatever the values.")


def bench_retrieval(store: Store, queries: list[str], uncached_queries: int) -> None:
    print(f"\n== top-5 retrieval over {store.retriever.refresh() or store.retriever._n:,} skills ==")
    r = store.retriever
    t0 = time.perf_counter()
    vectors = r.embedder.encode(queries, batch_size=64)
    for q, v in zip(queries, vectors):
        r._queries[q] = v
    encode_ms = (time.perf_counter() - t0) / len(queries) * 1e3
    store.search(queries[0], k=5)  # warm up
    warm = []
    for q in queries:
        t0 = time.perf_counter()
        store.search(q, k=5)
        warm.append((time.perf_counter() - t0) * 1e3)
    matrix, lexical = [], []
    for q in queries:
        qv = r.query_vector(q)
        t0 = time.perf_counter()
        scores = np.einsum("ij,j->i", r._matrix[: r._n], qv)
        np.argpartition(-scores, 4)[:5]
        t1 = time.perf_counter()
        r.lexical.scores(q, 100, r._n)
        t2 = time.perf_counter()
        matrix.append((t1 - t0) * 1e3)
        lexical.append((t2 - t1) * 1e3)
    cold = []
    for q in queries[:uncached_queries]:
        t0 = time.perf_counter()
        r.rank_uncached(q, 5)
        cold.append((time.perf_counter() - t0) * 1e3)
    single = []
    for q in queries[:20]:
        r._queries.pop(q, None)
        t0 = time.perf_counter()
        store.search(q, k=5)
        single.append((time.perf_counter() - t0) * 1e3)
    print(f"cached matrix + FTS5, query embedding ready: p50 {statistics.median(warm):6.2f} ms  p95 {p95(warm):6.2f} ms"
          f"   goal p95 <= 20 ms: {'met' if p95(warm) <= 20 else 'NOT met'}   [{len(warm)} queries]")
    print(f"  of which matrix product + top-k:          p50 {statistics.median(matrix):6.2f} ms  p95 {p95(matrix):6.2f} ms")
    print(f"  of which lexical (FTS5 BM25):              p50 {statistics.median(lexical):6.2f} ms  p95 {p95(lexical):6.2f} ms")
    print(f"recomputed from database rows (no cache):    p50 {statistics.median(cold):6.0f} ms  p95 {p95(cold):6.0f} ms"
          f"   [{len(cold)} queries]")
    print(f"speed-up (p95): {p95(cold) / p95(warm):.0f}x")
    print(f"end to end, encoding each query alone:       p50 {statistics.median(single):6.1f} ms  p95 {p95(single):6.1f} ms"
          f"   [{len(single)} queries; batched query encoding costs {encode_ms:.1f} ms/query]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=50_000, help="skills to generate and import")
    ap.add_argument("--batch", type=int, default=1000, help="skills per transaction in the batched import")
    ap.add_argument("--sample", type=int, default=500, help="skills imported one commit each (baseline, extrapolated)")
    ap.add_argument("--embed-sample", type=int, default=512, help="skills embedded in batches for the throughput figure")
    ap.add_argument("--single-sample", type=int, default=64, help="skills embedded one at a time (baseline)")
    ap.add_argument("--random-vectors", dest="embed_all", action="store_false",
                    help="give skills beyond the embedding sample random unit vectors instead of embedding all of them "
                         "(a quick run; search is then timed but not judged on them)")
    ap.add_argument("--queries", type=int, default=200, help="queries timed against the cached matrix")
    ap.add_argument("--uncached-queries", type=int, default=5, help="queries timed without the cache (slow)")
    ap.add_argument("--workdir", type=Path, default=None, help="where to build (default: a temp folder, removed after)")
    args = ap.parse_args()

    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-store-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        labelled = generate(work / "tree", args.n)
        print(f"generated {args.n:,} skill folders in {time.perf_counter() - t0:.1f} s (not counted)")
        store = bench_import(work, work / "tree", args.n, min(args.sample, args.n), args.batch)
        embedder = MiniLMEmbedder()
        store.retriever._embedder = embedder
        rate = bench_embedding(store, embedder, min(args.embed_sample, args.n), min(args.single_sample, args.n))
        fill_vectors(store, args.embed_all, rate)
        queries = [q for _, q in random.Random(1).sample(labelled, min(args.queries, args.n))]
        bench_retrieval(store, queries, args.uncached_queries)
        # Only skills with real embeddings can be judged (the rest hold random vectors).
        real = {v.skill_name for v in store.latest_versions()[: (args.n if args.embed_all else args.embed_sample)]}
        judged = [(name, q) for name, q in labelled if name in real][:50]
        right = sum(store.search(q, k=1)[0].skill_name == name for name, q in judged)
        print(f"sanity: '<identifier> raises <error>' queries answered first by their own skill: {right}/{len(judged)}")
        with store.db.read() as s:
            versions = s.exec(select(func.count()).select_from(SkillVersion)).one()
        print(f"store: {versions:,} versions, {len(store.artifacts.hashes()):,} artifact folders; "
              f"load average during the run {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        store.close()
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
