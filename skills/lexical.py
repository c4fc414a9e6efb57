"""Lexical scores, so an exact identifier in a query finds the skill that names it.

SQLite: the FTS5 table the store keeps in step with each skill's latest version (BM25).
Elsewhere (PostgreSQL): the same BM25 over an in-memory inverted index.

Scores are scaled to [0, 1] by the query's own vocabulary: the sum of the IDFs of its terms
that occur anywhere. A skill that shares only a common word with the query scores little;
one that contains the query's rare identifiers scores near 1. (Scaling by the best candidate
instead would hand a full bonus to whichever skill matched a single common word.)
"""
from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from typing import Iterable, Protocol

import numpy as np
from sqlalchemy import bindparam, text as sql

from skillgraft.skills.db import Database

_TOKEN = re.compile(r"\w+")
# Words that match nearly every skill cost FTS time and carry no signal.
_STOP = frozenset(
    "a an and are as at be but by can do does for from how i if in into is it its my no not of on or so that the "
    "then this to use what when why with you your".split()
)
MAX_TERMS = 24
# BM25 gives a single occurrence in a field of average length about idf * 1.2 (description weight
# 1.5 as configured in db.py, k1 1.2); dividing by this makes "contains every query term once"
# come out near 1.
_FTS_ONE_HIT = 1.5 * 2.2 / (1.5 + 1.2)


def _fold(text: str) -> str:
    """Lower case without diacritics, as FTS5's unicode61 tokenizer indexes words."""
    return "".join(c for c in unicodedata.normalize("NFKD", text.lower()) if not unicodedata.combining(c))


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(_fold(text))


def query_terms(query: str) -> list[str]:
    return list(dict.fromkeys(t for t in tokens(query) if t not in _STOP))[:MAX_TERMS]


def max_postings(n_docs: int) -> int:
    """Terms in more skills than this are left out of the match: scoring their long posting lists
    is what makes lexical search slow, and their low IDF would add little. They still count in
    the scale, so matching only them was never going to score much."""
    return max(200, n_docs // 100)


def fts_idf(n_docs: int, df: int) -> float:
    return max(math.log((n_docs - df + 0.5) / (df + 0.5)), 1e-6)


class LexicalIndex(Protocol):
    def update(self, docs: Iterable[tuple[int, str]]) -> None:
        """(skill id, text of its latest version) pairs; replaces earlier text of the same skill."""

    def scores(self, query: str, limit: int, n_docs: int) -> list[tuple[int, float]]:
        """Up to `limit` (skill id, score in (0, 1]), best first; n_docs is the corpus size."""


class FtsLexical:
    """Reads the FTS5 table; writers keep it current inside their own transactions."""

    def __init__(self, db: Database):
        self.db = db
        # Document frequencies change slowly and counting a common term's documents is slow,
        # so they are cached and forgotten when the corpus has grown or shrunk by 5%.
        self._df: dict[str, int] = {}
        self._df_corpus = 0

    def update(self, docs: Iterable[tuple[int, str]]) -> None:
        return None

    def _frequencies(self, conn, terms: list[str], n_docs: int) -> dict[str, int]:  # noqa: ANN001
        if abs(n_docs - self._df_corpus) > 0.05 * max(self._df_corpus, 1):
            self._df, self._df_corpus = {}, n_docs
        missing = [t for t in terms if t not in self._df]
        if missing:
            q = sql("SELECT term, doc FROM skill_fts_terms WHERE term IN :terms").bindparams(bindparam("terms", expanding=True))
            found = dict(conn.execute(q, {"terms": missing}).all())
            self._df.update((t, int(found.get(t, 0))) for t in missing)
        return {t: self._df[t] for t in terms}

    def scores(self, query: str, limit: int, n_docs: int) -> list[tuple[int, float]]:
        terms = query_terms(query)
        if not terms or not n_docs:
            return []
        with self.db.engine.connect() as conn:
            df = self._frequencies(conn, terms, n_docs)
            present = [t for t in terms if df[t] > 0]
            scale = _FTS_ONE_HIT * sum(fts_idf(n_docs, df[t]) for t in present)
            useful = [t for t in present if df[t] <= max_postings(n_docs)]
            if not useful or scale <= 0:
                return []
            match = " OR ".join(f'"{t}"' for t in useful)
            q = sql("SELECT rowid, rank FROM skill_fts WHERE skill_fts MATCH :m ORDER BY rank LIMIT :n")
            rows = conn.execute(q, {"m": match, "n": limit}).all()
        return [(int(r), min(1.0, -float(s) / scale)) for r, s in rows]


class MemoryBM25:
    """BM25 (k1=1.2, b=0.75) over an inverted index held in memory, updated in place."""

    def __init__(self, k1: float = 1.2, b: float = 0.75):
        self.k1, self.b = k1, b
        self.postings: dict[str, dict[int, int]] = {}
        self.doc_terms: dict[int, Counter] = {}
        self.length: dict[int, int] = {}
        self.total_length = 0
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._lengths: dict[str, np.ndarray] = {}

    def update(self, docs: Iterable[tuple[int, str]]) -> None:
        for doc_id, text in docs:
            old = self.doc_terms.pop(doc_id, None)
            if old is not None:
                self.total_length -= self.length.pop(doc_id)
                for term in old:
                    self.postings[term].pop(doc_id, None)
                    self._arrays.pop(term, None)
            counts = Counter(tokens(text))
            self.doc_terms[doc_id] = counts
            self.length[doc_id] = n = sum(counts.values())
            self.total_length += n
            for term, tf in counts.items():
                self.postings.setdefault(term, {})[doc_id] = tf
                self._arrays.pop(term, None)
        self._lengths.clear()

    def _posting_arrays(self, term: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if term not in self._arrays:
            plist = self.postings.get(term, {})
            self._arrays[term] = (np.fromiter(plist.keys(), dtype=np.int64, count=len(plist)),
                                  np.fromiter(plist.values(), dtype=np.float32, count=len(plist)))
        ids, tfs = self._arrays[term]
        if term not in self._lengths:
            self._lengths[term] = np.fromiter((self.length[i] for i in ids.tolist()), dtype=np.float32, count=len(ids))
        return ids, tfs, self._lengths[term]

    def scores(self, query: str, limit: int, n_docs: int = 0) -> list[tuple[int, float]]:
        n_docs = len(self.doc_terms)
        if not n_docs:
            return []
        avg = self.total_length / n_docs
        parts_ids, parts_scores, scale = [], [], 0.0
        for term in query_terms(query):
            ids, tfs, lengths = self._posting_arrays(term)
            if not len(ids):
                continue
            idf = fts_idf(n_docs, len(ids))
            scale += idf
            if len(ids) > max_postings(n_docs):
                continue
            parts_ids.append(ids)
            parts_scores.append(idf * tfs * (self.k1 + 1) / (tfs + self.k1 * (1 - self.b + self.b * lengths / avg)))
        if not parts_ids or scale <= 0:
            return []
        uniq, inverse = np.unique(np.concatenate(parts_ids), return_inverse=True)
        total: np.ndarray = np.zeros(len(uniq), dtype=np.float32)
        np.add.at(total, inverse, np.concatenate(parts_scores))
        top = np.argsort(-total)[:limit]
        return [(int(uniq[i]), min(1.0, float(total[i]) / scale)) for i in top]
