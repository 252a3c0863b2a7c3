"""Export a Transformer checkpoint to CTranslate2 (``nmt-export`` once installed): :mod:`nmt.cli.export`."""

import sys

from nmt.cli.export import main

if __name__ == "__main__":
    sys.exit(main())
