"""Importers: other tools' evaluation runs (Inspect AI, promptfoo, MLflow, OpenAI Evals) as
experiments of the bench, and OpenAI Evals samples and graders as a dataset and graders."""
