import sys

from conformance.drift.report import main

sys.exit(main())
