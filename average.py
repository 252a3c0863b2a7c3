"""Average checkpoints of one run into one (``nmt-average`` once installed): :mod:`nmt.cli.average`."""

import sys

from nmt.cli.average import main

if __name__ == "__main__":
    sys.exit(main())
