"""Migrated, empty PostgreSQL databases for tests, emptied and handed out again.

Each test used to get a database of its own made from a migrated template and dropped after it.
That is about 600 relations, so a file each, made and deleted per test: on the ext4 disks the
suite runs on, the kernel's search for a free inode past so many recently deleted ones cost more
CPU than the tests themselves. Here a database is made once and then emptied after each test
with DELETE (which makes no files): every table but `alembic_version`, foreign keys not checked
while it runs, sequences set back to their start. Connections the test left open are ended
first, as `DROP DATABASE ... WITH (FORCE)` did.

A test may change the schema itself (a migration test going down and up, a trigger that makes
the database refuse a value). The schema is compared with the template's after every test, and a
database that differs is dropped instead of reused, so no test sees what an earlier one built.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable

import psycopg
from psycopg import sql

Connection = psycopg.Connection[tuple[object, ...]]

SCHEMA_FINGERPRINT = """
SELECT md5(coalesce(string_agg(item, E'\\n' ORDER BY item), ''))
FROM (
    SELECT 'relation ' || c.relname || ' ' || c.relkind::text AS item
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'public'
    UNION ALL
    SELECT 'column ' || c.relname || '.' || a.attname || ' ' || a.attnum || ' '
        || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull || ' '
        || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
    FROM pg_attribute a
    JOIN pg_class c ON c.oid = a.attrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE n.nspname = 'public' AND a.attnum > 0 AND NOT a.attisdropped
    UNION ALL
    SELECT 'constraint ' || c.relname || ' ' || k.conname || ' ' || pg_get_constraintdef(k.oid)
    FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'public'
    UNION ALL
    SELECT 'index ' || pg_get_indexdef(i.indexrelid)
    FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'public'
    UNION ALL
    SELECT 'trigger ' || t.tgname || ' ' || t.tgenabled::text || ' ' || pg_get_triggerdef(t.oid)
    FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'public' AND NOT t.tgisinternal
    UNION ALL
    SELECT 'function ' || p.oid::regprocedure::text || ' ' || md5(coalesce(p.prosrc, ''))
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
    WHERE n.nspname = 'public'
    UNION ALL
    SELECT 'type ' || t.typname || ' ' || t.typtype::text
    FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
    WHERE n.nspname = 'public' AND t.typtype NOT IN ('b', 'c')
    UNION ALL
    SELECT 'schema ' || nspname FROM pg_namespace
    WHERE nspname NOT LIKE 'pg\\_%' AND nspname NOT IN ('information_schema', 'public')
    UNION ALL
    SELECT 'extension ' || extname || ' ' || extversion FROM pg_extension
    UNION ALL
    SELECT 'setting ' || array_to_string(setconfig, ',') FROM pg_db_role_setting
    WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
    UNION ALL
    SELECT 'revision ' || version_num FROM alembic_version
) AS schema
"""
"""One hash of everything in the database a test could have changed besides its rows."""

_END_OTHER_CONNECTIONS = """
SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
"""
_TABLES = """
SELECT tablename FROM pg_tables
WHERE schemaname = 'public' AND tablename <> 'alembic_version' ORDER BY tablename
"""
_RESTART_SEQUENCES = """
SELECT setval(format('%I.%I', schemaname, sequencename)::regclass, start_value, false)
FROM pg_sequences WHERE schemaname = 'public'
"""


class PostgresDatabases:
    """The databases of one test process, made from `template` as they are needed."""

    def __init__(
        self, template: str, admin: Callable[[], Connection], conninfo_for: Callable[[str], str]
    ) -> None:
        self.template = template
        self._admin = admin
        self._conninfo_for = conninfo_for
        self._free: list[str] = []
        self._made: set[str] = set()
        self._counter = itertools.count()
        with psycopg.connect(conninfo_for(template), autocommit=True) as conn:
            self._fingerprint = _fingerprint(conn)

    def take(self) -> str:
        """The name of an empty, migrated database for one test."""
        if self._free:
            return self._free.pop()
        name = f"neens_t_{os.getpid()}_{next(self._counter)}"
        with self._admin() as admin:
            admin.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                    sql.Identifier(name), sql.Identifier(self.template)
                )
            )
        self._made.add(name)
        return name

    def give_back(self, name: str) -> None:
        """Empty `name` for the next test, or drop it when the test changed its schema."""
        with psycopg.connect(self._conninfo_for(name), autocommit=True) as conn:
            conn.execute(_END_OTHER_CONNECTIONS)
            if _fingerprint(conn) != self._fingerprint:
                reusable = False
            else:
                _empty(conn)
                reusable = True
        if reusable:
            self._free.append(name)
        else:
            self._drop(name)

    def close(self) -> None:
        for name in sorted(self._made):
            self._drop(name)
        self._free.clear()

    def _drop(self, name: str) -> None:
        with self._admin() as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
        self._made.discard(name)


def _fingerprint(conn: Connection) -> str:
    row = conn.execute(SCHEMA_FINGERPRINT).fetchone()
    assert row is not None
    return str(row[0])


def _empty(conn: Connection) -> None:
    tables = [str(row[0]) for row in conn.execute(_TABLES)]
    # One round trip; replica mode skips the foreign-key triggers, so the order does not matter.
    statements = [sql.SQL("SET LOCAL session_replication_role = replica")]
    statements += [sql.SQL("DELETE FROM {}").format(sql.Identifier(table)) for table in tables]
    with conn.transaction():
        conn.execute(sql.SQL("; ").join(statements))
    conn.execute(_RESTART_SEQUENCES)
