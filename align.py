"""Align given translations (``nmt-align``): :mod:`nmt.cli.align`."""

import sys

from nmt.cli.align import main

if __name__ == "__main__":
    sys.exit(main())
