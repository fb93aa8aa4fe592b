"""What does the work: calling agent endpoints, running judges, scoring, baselines, roll-ups."""
