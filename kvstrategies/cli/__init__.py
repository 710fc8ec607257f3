"""The ``kvstrategies`` command line (``kvstrategies.cli.app:main``): :mod:`.app` the entry and
dispatch, one module per command (:mod:`.plan`, :mod:`.sweep`, :mod:`.compare`, :mod:`.verify`,
:mod:`.listings`, :mod:`.releases`), :mod:`.arguments` the flags ``plan``, ``sweep`` and
``compare`` share."""

from .app import main

__all__ = ["main"]
