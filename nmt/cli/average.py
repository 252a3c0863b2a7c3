"""Average checkpoints of one run into one self-contained checkpoint (translate with it like any other).

``python average.py --ckpt runs/<run>/checkpoints/best-*.ckpt --out averaged.ckpt``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nmt.commands import rendered
from nmt.errors import run


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ckpt", required=True, nargs="+", help="checkpoints of train.py of one model and sentencepiece "
                   "models, as translate.py's --ckpt takes several")  # fmt: skip
    p.add_argument("--out", required=True, help="where the averaged checkpoint goes")
    args = rendered(p).parse_args(argv)

    def average() -> None:
        from nmt.inference.averaging import average_checkpoints

        check_out(args.out, args.ckpt)  # before any checkpoint is read
        print(average_checkpoints(args.ckpt, args.out))

    return run(average)


def check_out(out: str, checkpoints: list[str]) -> None:
    """One line unless ``out`` is a new file that can be written: never one of the ``checkpoints`` averaged, nor
    any file that is there already (an average is not written over anything)."""
    from nmt.cli.options import output_file

    path = output_file("--out", out)
    if path.exists():
        averaged = any(path.samefile(c) for c in checkpoints if Path(c).exists())
        what = "one of the checkpoints to average" if averaged else "a file that is there already"
        raise ValueError(f"--out {out}: is {what}; give a new path (nothing was written)")


if __name__ == "__main__":
    sys.exit(main())
