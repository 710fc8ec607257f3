"""``python -m kvstrategies``: the ``kvstrategies`` command (:func:`kvstrategies.cli.app.main`)."""

import sys

from .cli.app import main

sys.exit(main())
