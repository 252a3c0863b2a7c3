"""Train a French→English attention NMT model (``nmt-train`` once installed): :mod:`nmt.cli.train`."""

from nmt.cli.train import main

if __name__ == "__main__":
    main()
