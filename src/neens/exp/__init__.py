"""The local experiment bench behind `neens exp`: run a task over a dataset, grade every answer,
and compare two runs with paired statistics. It needs no server: it works on the embedded SQLite
store of the project folder (`./.neens/neens.db`) or on PostgreSQL (`NEENS_DATABASE_URL`).

    spec       reading spec.json and -g graders, strictly (an unknown key is an error)
    datasets   cases from a JSONL file or a Neens dataset version, frozen at the start
    graders    exact, contains, regex, json_field, command and llm graders, each versioned
    tasks      the command and http tasks; every failure an infra or an agent error
    plan       which case-trials a run (or a resume) runs, and the fingerprints it is checked by
    runner     running case-trials concurrently, with retries, saving each as it finishes
    progress   the live bar on stderr
    store      opening the store; neens.store.experiments does the SQL
    listing    `exp list` and `exp status`
    regrade    `exp regrade`: stored outputs graded again, no task calls
    compare    `exp compare`: two runs read into `neens.domain.exp_compare`, and printed
    run_command  `exp run`
    aa         `exp aa`: one config run twice, interleaved, and its flip rate
    matrix     a matrix spec (matrix or variants): its cells, JSON Pointers, the interleaved order
    matrix_cli `exp run matrix.json`: the cells run, compared with the baseline, Holm-adjusted
    sources    the files a run is made from (spec, agent, graders, dataset), and their hashes
    sessions   `exp session`: each run's delta against the previous one, notes, the timeline
    watch      `exp run --watch`: run again (or regrade) when those files change
    sweep      `exp sweep`: configs raced by sequential halving, the winner checked on held-out
               cases and guard suites (sweep_cli: its flags and report)
    cli        the `neens exp` command group
"""
