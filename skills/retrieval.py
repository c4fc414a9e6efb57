"""Which skills fit a task: embedding similarity plus a lexical score.

The latest version of every skill has a row in an in-memory matrix of unit vectors, so a
query is one matrix-vector product and a partial sort. Embeddings are cached in the database
by the hash of the embedded text, so a skill is embedded once, whichever process asks. The
matrix follows the database: each search checks the newest version id and loads only what
is new. The lexical score (BM25 scaled to [0, 1], see lexical.py) is added with a weight,
so a query naming an exact identifier still finds the skill that mentions it.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import numpy as np
from sqlmodel import col, func, select
from sqlmodel.sql.expression import Select

from skillgraft.skills.db import Database
from skillgraft.skills.embedder import BATCH, Embedder, embedding_key, skill_text
from skillgraft.skills.lexical import FtsLexical, LexicalIndex, MemoryBM25
from skillgraft.skills.schema import Embedding, SkillVersion, saved_id

LEXICAL_WEIGHT = 0.3
LEXICAL_POOL = 100
_CHUNK = 500


def _select(*columns: Any) -> Select[*tuple[Any, ...]]:
    """select() over more columns than sqlmodel's overloads type (four); the same statement at run time."""
    return Select(*columns)


@dataclass(frozen=True)
class SearchHit:
    skill_name: str
    version: SkillVersion  # the skill's latest version: .body, .text, .number, .id
    score: float
    semantic: float = 0.0
    lexical: float = 0.0


@dataclass(frozen=True)
class _Doc:
    version_id: int
    skill_id: int
    name: str
    number: int
    text: str


class Retriever:
    def __init__(self, db: Database, embedder: Callable[[], Embedder], lexical_weight: float = LEXICAL_WEIGHT):
        self.db = db
        self._embedder_factory = embedder
        self._embedder: Optional[Embedder] = None
        self.lexical_weight = lexical_weight
        self.lexical: LexicalIndex = FtsLexical(db) if db.has_fts else MemoryBM25()
        self._lock = threading.RLock()
        self._matrix: np.ndarray = np.zeros((0, 0), dtype=np.float32)
        self._n = 0
        self._row_of: dict[int, int] = {}  # skill id -> matrix row
        self._skill_of_row: list[int] = []
        self._version_of_row: list[int] = []
        self._number_of: dict[int, int] = {}
        self._watermark = 0
        self._seen_ids: set[int] = set()  # kept only where ids can commit out of order (not SQLite)
        self._seen = 0
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = self._embedder_factory()
        return self._embedder

    # ---- embeddings (cached in the database) ---------------------------------------------
    def embed_texts(self, texts: Sequence[str], batch_size: int = BATCH, progress: Optional[Callable[[int], None]] = None) -> np.ndarray:
        """Vectors for texts, from the cache where present; new ones are encoded in batches and stored."""
        model = self.embedder.name
        keys = [embedding_key(model, t) for t in texts]
        found: dict[str, np.ndarray] = {}
        with self.db.read() as s:
            for i in range(0, len(keys), _CHUNK):
                chunk = list(set(keys[i : i + _CHUNK]))
                for key, blob in s.exec(select(Embedding.content_hash, Embedding.vector).where(
                        Embedding.model == model, col(Embedding.content_hash).in_(chunk))):
                    found[key] = np.frombuffer(blob, dtype=np.float32)
        todo = list(dict.fromkeys(k for k in keys if k not in found))
        text_of = dict(zip(keys, texts))
        if progress and found:
            progress(sum(1 for k in keys if k in found))
        step = max(batch_size * 16, _CHUNK)
        for i in range(0, len(todo), step):
            chunk = todo[i : i + step]
            vectors = self.embedder.encode([text_of[k] for k in chunk], batch_size=batch_size)
            self._store_vectors(model, dict(zip(chunk, vectors)))
            found.update(zip(chunk, vectors))
            if progress:
                progress(len(chunk))
        dim = self.embedder.dim
        return np.stack([found[k] for k in keys]).astype(np.float32) if keys else np.zeros((0, dim), np.float32)

    def _store_vectors(self, model: str, vectors: dict[str, np.ndarray]) -> None:
        with self.db.write() as s:
            have = set(s.exec(select(Embedding.content_hash).where(
                Embedding.model == model, col(Embedding.content_hash).in_(list(vectors)))).all())
            s.add_all(
                Embedding(content_hash=k, model=model, dim=len(v), vector=np.asarray(v, np.float32).tobytes())
                for k, v in vectors.items() if k not in have
            )

    def query_vector(self, query: str) -> np.ndarray:
        with self._lock:
            if query in self._queries:
                self._queries.move_to_end(query)
                return self._queries[query]
        vector = self.embedder.encode([query])[0]
        with self._lock:
            self._queries[query] = vector
            if len(self._queries) > 512:
                self._queries.popitem(last=False)
        return vector

    # ---- the in-memory matrix --------------------------------------------------------------
    def refresh(self, batch_size: int = BATCH, progress: Optional[Callable[[int], None]] = None) -> int:
        """Brings the matrix up to the database; returns how many skills changed."""
        with self._lock:
            with self.db.engine.connect() as conn:  # a bare connection: this check runs on every search
                count: Optional[int] = None
                if self.db.is_sqlite:
                    # One writer at a time: version ids become visible in order, the newest id says it all.
                    newest = conn.execute(select(func.max(SkillVersion.id))).scalar()
                else:
                    # Concurrent writers can commit a lower id after a higher one; the count shows the gap.
                    count, newest = conn.execute(select(func.count(), func.max(SkillVersion.id))).one()
            newest = newest or 0
            gap = count is not None and count != self._seen
            if newest <= self._watermark and not gap:
                return 0
            columns = (SkillVersion.id, SkillVersion.skill_id, SkillVersion.skill_name, SkillVersion.number,
                       SkillVersion.description, SkillVersion.body)
            with self.db.read() as s:
                rows = list(s.exec(_select(*columns).where(col(SkillVersion.id) > self._watermark, col(SkillVersion.id) <= newest)))
                if gap and self._seen_ids:
                    known = s.exec(select(SkillVersion.id).where(col(SkillVersion.id) <= self._watermark))
                    late_ids = sorted({saved_id(i) for i in known} - self._seen_ids)
                    for i in range(0, len(late_ids), _CHUNK):
                        rows += s.exec(_select(*columns).where(col(SkillVersion.id).in_(late_ids[i : i + _CHUNK])))
            latest: dict[int, _Doc] = {}
            for vid, sid, name, number, desc, body in rows:
                if number > self._number_of.get(sid, 0) and (sid not in latest or number > latest[sid].number):
                    latest[sid] = _Doc(vid, sid, name, number, skill_text(name, desc, body))
            docs = list(latest.values())
            vectors = self.embed_texts([d.text for d in docs], batch_size=batch_size, progress=progress)
            self._place(docs, vectors)
            if not self.db.has_fts:
                self.lexical.update((d.skill_id, d.text) for d in docs)
            self._watermark = newest
            if count is not None:
                self._seen_ids.update(r[0] for r in rows)
                self._seen = len(self._seen_ids)
            return len(docs)

    def _place(self, docs: list[_Doc], vectors: np.ndarray) -> None:
        if not docs:
            return
        if self._matrix.shape[1] != vectors.shape[1]:
            self._matrix = np.zeros((0, vectors.shape[1]), dtype=np.float32)
        new = sum(1 for d in docs if d.skill_id not in self._row_of)
        if self._n + new > len(self._matrix):
            grown = np.zeros((max(2 * len(self._matrix), self._n + new, 64), vectors.shape[1]), dtype=np.float32)
            grown[: self._n] = self._matrix[: self._n]
            self._matrix = grown
        for doc, vector in zip(docs, vectors):
            row = self._row_of.get(doc.skill_id)
            if row is None:
                row = self._row_of[doc.skill_id] = self._n
                self._skill_of_row.append(doc.skill_id)
                self._version_of_row.append(doc.version_id)
                self._n += 1
            else:
                self._version_of_row[row] = doc.version_id
            self._matrix[row] = vector
            self._number_of[doc.skill_id] = doc.number

    # ---- searching ---------------------------------------------------------------------------
    def rank(self, query: str, k: int = 5) -> list[tuple[int, float, float, float]]:
        """(version id, score, semantic, lexical) of the best k skills."""
        self.refresh()
        with self._lock:
            if self._n == 0 or k <= 0:
                return []
            # einsum rather than BLAS: one matrix-vector product is memory bound, and BLAS's
            # thread hand-offs cost more than they save (badly so on a busy machine).
            semantic = np.einsum("ij,j->i", self._matrix[: self._n], self.query_vector(query))
            return self._combine(query, semantic, self._row_of, self._version_of_row, k)

    def _combine(self, query: str, semantic: np.ndarray, row_of: dict[int, int], version_of_row: list[int], k: int):
        combined = semantic.copy()
        lexical = np.zeros_like(semantic)
        hits = self.lexical.scores(query, LEXICAL_POOL, len(semantic)) if self.lexical_weight else []
        if hits:
            rows = [(row_of[sid], s) for sid, s in hits if sid in row_of]
            if rows:
                idx, val = np.array([r for r, _ in rows]), np.array([v for _, v in rows], dtype=np.float32)
                lexical[idx] = val
                combined[idx] += self.lexical_weight * val
        k = min(k, len(combined))
        best = np.argpartition(-combined, k - 1)[:k]
        best = best[np.argsort(-combined[best])]
        return [(version_of_row[i], float(combined[i]), float(semantic[i]), float(lexical[i])) for i in best]

    def rank_uncached(self, query: str, k: int = 5) -> list[tuple[int, float, float, float]]:
        """The same ranking without the in-memory matrix: read every latest version and its vector.

        Kept as the baseline the benchmark measures the cache against.
        """
        with self.db.read() as s:
            newest = select(SkillVersion.skill_id, func.max(SkillVersion.number).label("n")).group_by(col(SkillVersion.skill_id)).subquery()
            rows = s.exec(_select(SkillVersion.id, SkillVersion.skill_id, SkillVersion.skill_name, SkillVersion.description,
                                  SkillVersion.body).join(newest, (col(SkillVersion.skill_id) == newest.c.skill_id)
                                                          & (col(SkillVersion.number) == newest.c.n))).all()
        if not rows:
            return []
        vectors = self.embed_texts([skill_text(name, desc, body) for _, _, name, desc, body in rows])
        row_of = {sid: i for i, (_, sid, _, _, _) in enumerate(rows)}
        semantic = vectors @ self.query_vector(query)
        return self._combine(query, semantic, row_of, [vid for vid, *_ in rows], k)
