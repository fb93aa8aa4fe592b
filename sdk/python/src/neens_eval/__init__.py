"""The dependency-free Neens client and the `neens` command line."""

__version__ = "0.1.0"
