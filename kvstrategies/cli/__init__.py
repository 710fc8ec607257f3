"""The ``kvstrategies`` command line (``kvstrategies.cli.app:main``)."""

from .app import main

__all__ = ["main"]
