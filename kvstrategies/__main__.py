"""``python -m kvstrategies``: the ``kvstrategies`` command (:func:`kvstrategies.cli.main`)."""

import sys

from .cli import main

sys.exit(main())
