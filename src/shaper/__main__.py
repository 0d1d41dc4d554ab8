"""``python -m shaper``: the same as the ``shaper`` command."""

from .cli import main

raise SystemExit(main())
