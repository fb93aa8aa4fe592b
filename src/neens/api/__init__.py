"""FastAPI routers, one per resource, and their pydantic schemas. OpenAPI is the contract."""
