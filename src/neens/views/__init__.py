"""What a run got, as plain async functions over the database: the gate, the comparison, the
metrics, the run and its items, Compare Versions and the trajectory diff.

Routes, pages, MCP tools and roll-ups call these same functions and only render what they
return, so no two of them can disagree. Each takes the `Database` and the caller's project id
first; an id of another project is `NotFound`, exactly like an id that does not exist. Views
read through `neens.store` and compute through `neens.domain`, and never derive a number
themselves.
"""
