"""Errors of the importers.

ConfigError (neens_eval)   bad input: `neens` prints its one line and exits 2
└── ImportFormatError      a file that is not what its format says, naming where
"""

from __future__ import annotations

from neens_eval.errors import ConfigError


class ImportFormatError(ConfigError):
    """A file that cannot be read as the format it was given as; the message names where."""
