"""The suite's reused PostgreSQL databases (tests/support/pg_pool.py): what a test leaves behind
never reaches the next one."""

from __future__ import annotations

import psycopg
import pytest

from tests.conftest import _pg_conninfo_for
from tests.support.pg_pool import PostgresDatabases


def _connect(name: str) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(_pg_conninfo_for(name), autocommit=True)


def _exists(name: str) -> bool:
    with _connect("postgres") as admin:
        found = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
    return found is not None


def test_rows_are_emptied_and_sequences_start_again(pg_databases: PostgresDatabases) -> None:
    name = pg_databases.take()
    with _connect(name) as conn:
        conn.execute("INSERT INTO companies (id, name, created_at) VALUES ('c1', 'Acme', now())")
        conn.execute(
            "INSERT INTO projects (id, company_id, name, created_at) "
            "VALUES ('p1', 'c1', 'Support agent', now())"
        )
        first = conn.execute("SELECT nextval('spans_pk_seq')").fetchone()
        conn.execute("SELECT nextval('spans_pk_seq')")
    pg_databases.give_back(name)
    again = pg_databases.take()
    try:
        assert again == name
        with _connect(again) as conn:
            rows = conn.execute(
                "SELECT (SELECT count(*) FROM companies), (SELECT count(*) FROM projects)"
            ).fetchone()
            assert rows == (0, 0)
            assert conn.execute("SELECT nextval('spans_pk_seq')").fetchone() == first
            revision = conn.execute("SELECT count(*) FROM alembic_version").fetchone()
            assert revision == (1,)  # the migration's own row stays
    finally:
        pg_databases.give_back(again)


def test_a_changed_schema_is_dropped_not_handed_out_again(
    pg_databases: PostgresDatabases,
) -> None:
    name = pg_databases.take()
    with _connect(name) as conn:
        conn.execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'no'; END $$"
        )
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON companies "
            "FOR EACH ROW EXECUTE FUNCTION refuse()"
        )
    pg_databases.give_back(name)
    assert not _exists(name)
    fresh = pg_databases.take()
    try:
        assert fresh != name
        with _connect(fresh) as conn:
            conn.execute("INSERT INTO companies (id, name, created_at) VALUES ('c', 'A', now())")
    finally:
        pg_databases.give_back(fresh)


def test_a_connection_the_test_left_open_is_ended(pg_databases: PostgresDatabases) -> None:
    name = pg_databases.take()
    left_open = _connect(name)
    left_open.execute("BEGIN")
    left_open.execute("INSERT INTO companies (id, name, created_at) VALUES ('c', 'A', now())")
    pg_databases.give_back(name)  # else it could write into the next test's database
    with pytest.raises(psycopg.OperationalError):
        left_open.execute("SELECT 1")
    left_open.close()
