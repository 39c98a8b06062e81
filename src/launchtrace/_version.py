"""launchtrace's version: one source, pyproject.toml, read from the installed package's metadata."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("launchtrace")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
