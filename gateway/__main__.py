"""``python -m gateway``: the ``nightowl`` command line."""

import sys

from gateway.ops.cli import main

sys.exit(main())
