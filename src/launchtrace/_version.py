"""launchtrace's version, its one source: pyproject.toml reads it from here (``[tool.setuptools.dynamic]``).

A plain constant, so that reading it costs nothing: looking it up in the installed package's metadata
(``importlib.metadata``) was a visible part of every ``baseline build``'s start-up (figures: docs/fleet.md).
"""

__version__ = "0.1.0"
