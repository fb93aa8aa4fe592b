"""The worked example, `neens demo`: simulated models to run Neens against without a network,
and the seeded sweep.

`endpoints` are the simulated HTTP endpoints tests and benchmarks use too; `catalog` is the
example's data (golden items, model profiles, agent versions, rubrics); `simulated` serves it;
`seed` loads it into a server through its API; `story` predicts the comparison it must give;
`command` is the `neens demo` command.
"""
