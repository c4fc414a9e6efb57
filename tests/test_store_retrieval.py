"""Retrieval with the real all-MiniLM-L6-v2 encoder on a small labelled set."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from skillgraft.skills import Store
from skillgraft.skills.embedder import MiniLMEmbedder
from store_fixtures import pg_url, postgres_server, store_url  # noqa: F401

SKILLS = {
    "fix-python-imports": ("Resolve ImportError and ModuleNotFoundError in Python packages",
                           "Check the package layout, add __init__.py, prefer absolute imports, and install the project in editable mode."),
    "resolve-git-conflicts": ("Resolve merge conflicts in git",
                              "Run git status, open files with conflict markers, keep the right side, git add, then git commit."),
    "pytest-fixtures": ("Write reusable pytest fixtures",
                        "Use conftest.py for shared fixtures, yield for teardown, and scope='session' for expensive setup."),
    "docker-layer-cache": ("Speed up Docker image builds with layer caching",
                           "Copy requirements first, install dependencies, then copy source so the dependency layer is reused."),
    "sql-migrations": ("Write safe database schema migrations",
                       "Add columns as nullable, backfill in batches, then add constraints; never rename in one step."),
    "regex-debugging": ("Debug regular expressions that do not match",
                        "Test the pattern on small inputs, escape special characters, and use raw strings in Python."),
    "http-retry-backoff": ("Retry flaky HTTP requests with exponential backoff",
                           "Retry on 429 and 5xx with jittered exponential delays and a maximum number of attempts."),
    "numpy-broadcasting": ("Fix numpy shape and broadcasting errors",
                           "Print array shapes, add axes with np.newaxis or reshape, and check which dimensions must match."),
    "memory-leak-hunt": ("Find memory leaks in long running Python services",
                         "Use tracemalloc snapshots, compare allocations over time, and look for growing caches."),
    "css-flexbox": ("Lay out web page elements with CSS flexbox",
                    "Use display:flex, justify-content for the main axis, align-items for the cross axis."),
    "config-loader": ("Load project settings from files",
                      "Call frobnicate_config(path) to read the settings; it merges defaults with the user's file."),
}

QUERIES = [
    ("ModuleNotFoundError: No module named 'mypkg' when running the tests", "fix-python-imports"),
    ("git says CONFLICT (content) after pulling from main", "resolve-git-conflicts"),
    ("share a database connection setup across many test functions", "pytest-fixtures"),
    ("container image rebuild reinstalls all dependencies every time", "docker-layer-cache"),
    ("add a NOT NULL column to a large production table", "sql-migrations"),
    ("my pattern with a dot and parentheses never matches the log line", "regex-debugging"),
    ("API calls sometimes fail with 503 Service Unavailable", "http-retry-backoff"),
    ("ValueError: operands could not be broadcast together with shapes (3,4) (3,)", "numpy-broadcasting"),
    ("the web server's RSS keeps growing for days until it is killed", "memory-leak-hunt"),
    ("center a button horizontally and vertically inside a div", "css-flexbox"),
    ("frobnicate_config raises KeyError", "config-loader"),
]


class CountingEmbedder:
    """The real encoder, counting how many texts it was asked to encode."""

    def __init__(self, inner: MiniLMEmbedder):
        self.inner, self.name, self.dim, self.encoded = inner, inner.name, inner.dim, 0

    def encode(self, texts, batch_size: int = 64) -> np.ndarray:  # noqa: ANN001
        self.encoded += len(texts)
        return self.inner.encode(texts, batch_size=batch_size)


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


def test_the_onnx_encoder_computes_what_sentence_transformers_computes(minilm: MiniLMEmbedder, tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    from skillgraft.skills.embedder import minilm_path

    texts = ["fix import errors", "", "x " * 400,  # past the 256-token cut
             "Read the failing assertion.\n\nThen replace the constant with the expected one, and run the tests."]
    reference = SentenceTransformer(str(minilm_path()), device="cpu", local_files_only=True).encode(
        texts, normalize_embeddings=True, convert_to_numpy=True)
    batched = minilm.encode(texts, batch_size=3)
    np.testing.assert_allclose(batched, reference, atol=2e-6)
    np.testing.assert_allclose(np.stack([minilm.encode([t])[0] for t in texts]), batched, atol=2e-6)
    fresh = MiniLMEmbedder(cache_dir=tmp_path / "cache")  # exported once, then found again
    fresh.encode(["x"])
    (exported,) = list((tmp_path / "cache").glob("*.onnx"))
    assert MiniLMEmbedder(cache_dir=tmp_path / "cache").encode(["x"]).shape == (1, 384)
    assert list((tmp_path / "cache").iterdir()) == [exported]


def fill(store: Store) -> None:
    for name, (description, body) in SKILLS.items():
        store.add_version(name, body + "\n", "authored", description=description)


def test_encoder_is_loaded_offline_and_normalised(minilm: MiniLMEmbedder) -> None:
    vectors = minilm.encode(["fix import errors", "resolve merge conflicts"])
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    close = minilm.encode(["repair broken imports"])[0]
    assert close @ vectors[0] > close @ vectors[1]


def test_relevant_skill_ranks_first(minilm: MiniLMEmbedder, store_url: str, tmp_path: Path) -> None:
    store = Store(store_url, tmp_path / "artifacts", embedder=minilm)
    fill(store)
    misses = []
    for query, expected in QUERIES:
        hits = store.search(query, k=3)
        assert len(hits) == 3 and hits[0].score >= hits[1].score >= hits[2].score
        if hits[0].skill_name != expected:
            misses.append((query, expected, [h.skill_name for h in hits]))
    assert not misses
    exact = store.search("frobnicate_config", k=1)[0]
    assert exact.skill_name == "config-loader" and exact.lexical > 0.5
    store.close()


def test_embeddings_are_cached_by_content(minilm: MiniLMEmbedder, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    counting = CountingEmbedder(minilm)
    store = Store(url, tmp_path / "artifacts", embedder=counting)
    fill(store)
    store.search("merge conflict", k=1)
    assert counting.encoded == len(SKILLS) + 1  # every skill once, plus the query
    store.search("merge conflict", k=1)
    assert counting.encoded == len(SKILLS) + 1  # nothing new: matrix and query are cached

    store.add_version("css-flexbox", "Use display:grid for two-dimensional layouts.\n", "refined")
    top = store.search("two-dimensional grid layout of a web page", k=1)[0]
    assert (top.skill_name, top.version.number) == ("css-flexbox", 2)
    assert counting.encoded == len(SKILLS) + 3  # just the new version and the new query
    store.close()

    fresh = CountingEmbedder(minilm)  # another process opening the same store embeds nothing again
    again = Store(url, tmp_path / "artifacts", embedder=fresh)
    assert again.search("git merge conflict markers", k=1)[0].skill_name == "resolve-git-conflicts"
    assert fresh.encoded == 1
    again.close()


def test_search_sees_versions_written_by_another_store(minilm: MiniLMEmbedder, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    reader = Store(url, tmp_path / "artifacts", embedder=minilm)
    writer = Store(url, tmp_path / "artifacts", embedder=minilm)
    assert reader.search("anything", k=3) == []
    fill(writer)
    assert reader.search("numpy broadcast shapes mismatch", k=1)[0].skill_name == "numpy-broadcasting"
    ranked_cached = reader.retriever.rank("numpy broadcast shapes mismatch", 5)
    ranked_plain = reader.retriever.rank_uncached("numpy broadcast shapes mismatch", 5)
    assert [r[0] for r in ranked_cached] == [r[0] for r in ranked_plain]
    reader.close()
    writer.close()


def test_lexical_score_rewards_rare_identifiers_not_common_words(store_url: str, tmp_path: Path) -> None:
    """FTS5 on SQLite, the in-memory BM25 elsewhere: same scale, same verdicts."""
    from skillgraft.skills.lexical import FtsLexical, MemoryBM25

    store = Store(store_url, tmp_path / "artifacts")
    for i in range(40):
        store.add_version(f"skill-{i}", f"Run the tests and read the error output, step {i}.\n", "authored",
                          description=f"Common advice number {i}")
    target = store.add_version("loader", "Call frobnicate_config(path); it reads the error log.\n", "authored",
                               description="Load settings")
    lexical = store.retriever.lexical
    assert isinstance(lexical, FtsLexical if store.db.is_sqlite else MemoryBM25)
    if isinstance(lexical, MemoryBM25):
        lexical.update((v.skill_id, f"{v.skill_name} {v.description} {v.body}") for v in store.latest_versions())
    n = len(store.skills())
    ranked = dict(lexical.scores("frobnicate_config error", 10, n))
    assert max(ranked, key=ranked.get) == target.skill_id and ranked[target.skill_id] > 0.6
    assert all(score < 0.2 for sid, score in ranked.items() if sid != target.skill_id)
    common = [score for _, score in lexical.scores("error output", 10, n)]
    assert common and max(common) - min(common) < 0.1  # words every skill has lift all alike, reorder nothing
    store.close()


def test_opening_the_store_again_does_not_fail_a_search_running_on_it(tmp_path: Path) -> None:
    """A learner searches the store while the UI or the CLI opens it from another process: FTS5
    fails the next MATCH of every other connection after a write to its config."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    running = Store(url, tmp_path / "artifacts")
    skill = running.add_version("loader", "Call frobnicate_config(path).\n", "authored", description="Load settings")
    assert [sid for sid, _ in running.retriever.lexical.scores("frobnicate_config", 5, 1)] == [skill.skill_id]
    Store(url, tmp_path / "artifacts").close()  # another process, opening the same file
    assert [sid for sid, _ in running.retriever.lexical.scores("frobnicate_config", 5, 1)] == [skill.skill_id]
    running.close()


@pytest.mark.postgres
def test_versions_committed_out_of_id_order_are_still_found(minilm: MiniLMEmbedder, pg_url: str, tmp_path: Path) -> None:
    """On PostgreSQL a lower id can commit after a higher one; the search must not skip it."""
    from skillgraft.skills.schema import Skill, SkillVersion, utcnow

    reader = Store(pg_url, tmp_path / "artifacts", embedder=minilm)
    writer = Store(pg_url, tmp_path / "artifacts", embedder=minilm)
    fill(writer)
    assert reader.search("git conflict markers", k=1)[0].skill_name == "resolve-git-conflicts"

    def row(session, name: str, body: str) -> SkillVersion:  # noqa: ANN001
        skill = Skill(name=name)
        session.add(skill)
        session.flush()
        return SkillVersion(skill_id=skill.id, skill_name=name, number=1, text=f"---\\nname: {name}\\ndescription: d\\n---\\n{body}",
                            body=body, description="Bake sourdough bread", frontmatter={}, content_hash=name * 2,
                            origin="authored", created_at=utcnow())

    with writer.db.write() as slow:  # takes the lower id, commits last
        slow.add(row(slow, "sourdough-bread", "Feed the starter, then knead the dough.\n"))
        slow.flush()
        with writer.db.write() as fast:
            fast.add(row(fast, "espresso-shots", "Grind fine and pull a 25 second shot.\n"))
        assert reader.search("pull an espresso shot", k=1)[0].skill_name == "espresso-shots"
    assert reader.search("knead dough with a sourdough starter", k=1)[0].skill_name == "sourdough-bread"
    reader.close()
    writer.close()
