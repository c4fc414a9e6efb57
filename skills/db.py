"""The database connection: any SQLAlchemy URL; SQLite gets WAL, a busy timeout and write locks up front.

SQLite's default deferred transactions let two writers both read, then one fails to upgrade
its lock with an error no busy timeout retries. Write sessions here begin IMMEDIATE instead,
so writers queue on the lock while readers carry on (WAL). On other backends a lost race shows
up as a unique-constraint violation, which `retrying` turns into another attempt.
"""
from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, TypeVar

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.pool import StaticPool
from sqlmodel import Session, SQLModel
from tenacity import retry, retry_if_exception, stop_after_attempt, wait_random_exponential

from skillgraft.skills import schema  # noqa: F401  (registers the tables on SQLModel.metadata)

BUSY_TIMEOUT_S = 30.0
T = TypeVar("T")

# No stemming: the lexical score is there for exact identifiers (the embedding covers paraphrase),
# and unstemmed terms can be looked up in the vocabulary table for their document frequency.
FTS_DDL = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS skill_fts USING fts5("
    "name, description, body, version_id UNINDEXED, tokenize=\"unicode61 tokenchars '_'\")",
    "CREATE VIRTUAL TABLE IF NOT EXISTS skill_fts_terms USING fts5vocab(skill_fts, 'row')",
)
# Column weights for ORDER BY rank (name, description, body); FTS5 keeps this in its config.
FTS_RANK = "bm25(2.0, 1.5, 1.0)"


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, IntegrityError):
        return True
    if isinstance(exc, OperationalError):
        msg = str(exc).lower()
        return any(s in msg for s in ("locked", "busy", "serializ", "deadlock"))
    return False


def retrying(fn: Callable[[], T], attempts: int = 12) -> T:
    """Runs a whole transaction again when another writer got there first."""
    return retry(
        retry=retry_if_exception(_is_transient),
        stop=stop_after_attempt(attempts),
        wait=wait_random_exponential(multiplier=0.005, max=0.5),
        reraise=True,
    )(fn)()


def _fts5_available() -> bool:
    try:
        sqlite3.connect(":memory:").execute("CREATE VIRTUAL TABLE t USING fts5(a)")
        return True
    except sqlite3.OperationalError:
        return False


def make_engine(url: str, busy_timeout_s: float = BUSY_TIMEOUT_S) -> Engine:
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True)
    memory = url in ("sqlite://", "sqlite:///:memory:") or "mode=memory" in url
    database = make_url(url).database
    if not memory and database and not database.startswith("file:"):
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        url,
        connect_args={"timeout": busy_timeout_s, "check_same_thread": False},
        poolclass=StaticPool if memory else None,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:  # noqa: ANN001
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves, below
        cur = dbapi_conn.cursor()
        if not memory:
            cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
        cur.execute("PRAGMA foreign_keys=ON")
        # FULL: a committed row survives power loss too, matching the fsynced artifacts it names.
        cur.execute("PRAGMA synchronous=FULL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:  # noqa: ANN001
        conn.exec_driver_sql(conn.get_execution_options().get("sqlite_begin", "BEGIN"))

    return engine


class Database:
    def __init__(self, url: str, busy_timeout_s: float = BUSY_TIMEOUT_S):
        self.url = url
        self.engine = make_engine(url, busy_timeout_s)
        self.dialect = self.engine.dialect.name
        self.is_sqlite = self.dialect == "sqlite"
        self._writer = self.engine.execution_options(sqlite_begin="BEGIN IMMEDIATE") if self.is_sqlite else self.engine
        self.has_fts = self.is_sqlite and _fts5_available()
        retrying(self._create)

    def _create(self) -> None:
        with self._writer.begin() as conn:
            if self.dialect == "postgresql":
                # Two processes opening a fresh database at once must not both create tables.
                conn.execute(text("SELECT pg_advisory_xact_lock(726173)"))
            SQLModel.metadata.create_all(conn)
            # create_all skips tables that exist; an index added to the schema later still arrives.
            for table in SQLModel.metadata.sorted_tables:
                for index in table.indexes:
                    index.create(conn, checkfirst=True)
            if self.has_fts:
                for ddl in FTS_DDL:
                    conn.exec_driver_sql(ddl)
                # Written only when it differs: every write to the FTS5 config fails the next
                # MATCH of each other connection open on the table (a running learner, say)
                # with "SQL logic error", so merely opening the store must not write it.
                rank = conn.exec_driver_sql("SELECT v FROM skill_fts_config WHERE k = 'rank'").scalar()
                if rank != FTS_RANK:
                    conn.exec_driver_sql("INSERT INTO skill_fts(skill_fts, rank) VALUES ('rank', ?)", (FTS_RANK,))

    @contextmanager
    def read(self) -> Iterator[Session]:
        with Session(self.engine, expire_on_commit=False) as session:
            yield session

    @contextmanager
    def write(self) -> Iterator[Session]:
        """One transaction: commits when the block ends, rolls back if it raises."""
        with Session(self._writer, expire_on_commit=False) as session:
            try:
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                raise

    def close(self) -> None:
        self.engine.dispose()
