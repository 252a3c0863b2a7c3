"""Serve a checkpoint or an export over HTTP (``nmt-serve`` once installed): :mod:`nmt.cli.serve`."""

import sys

from nmt.cli.serve import main

if __name__ == "__main__":
    sys.exit(main())
