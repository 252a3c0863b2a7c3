"""Average checkpoints of one run into one self-contained checkpoint (translate with it like any other).

``python average.py --out averaged.ckpt runs/<run>/checkpoints/best-*.ckpt``
"""

from __future__ import annotations

import argparse
import sys

from nmt.errors import run


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoints", nargs="+", help="checkpoints of the same model and sentencepiece models")
    p.add_argument("--out", required=True, help="where the averaged checkpoint goes")
    args = p.parse_args(argv)

    def average() -> None:
        from nmt.inference.averaging import average_checkpoints

        print(average_checkpoints(args.checkpoints, args.out))

    return run(average)


if __name__ == "__main__":
    sys.exit(main())
