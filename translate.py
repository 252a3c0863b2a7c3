"""Translate (``nmt-translate``): :mod:`nmt.cli.translate`."""

import sys

from nmt.cli.translate import main

if __name__ == "__main__":
    sys.exit(main())
