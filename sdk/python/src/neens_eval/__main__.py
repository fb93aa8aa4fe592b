"""`python -m neens_eval` runs the `neens` command, for when scripts are not on PATH."""

from neens_eval.cli import main

raise SystemExit(main())
