"""`python -m conformance` is the `conformance` command."""

import sys

from conformance.cli import main

sys.exit(main())
