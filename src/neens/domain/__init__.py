"""Pure logic, no I/O: plain data in, plain data out. Imports no SQLAlchemy, FastAPI or httpx."""
