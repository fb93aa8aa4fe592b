"""Neens: which version of an LLM agent is safe to ship, and which model it should run on."""

__version__ = "0.1.0"
