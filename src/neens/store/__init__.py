"""SQLAlchemy models, Alembic migrations and queries. SQLite by default, PostgreSQL by URL."""
