"""Export a Transformer checkpoint to CTranslate2, the inference engine OpenNMT-py, fairseq and Marian models deploy on;
then translate and serve it with the same commands as a checkpoint.

python export.py --ckpt best.ckpt --out model-int8 --quantization int8
python translate.py --ckpt model-int8 --beam-size 5 < test.fr > test.en
python serve.py --ckpt model-int8

The engine returns the attention of one layer: the checkpoint's recorded choice, or --align-layer/--align-head.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nmt.commands import rendered
from nmt.errors import run


def main(argv: list[str] | None = None) -> int:
    from nmt.alignment.choice import READOUTS
    from nmt.alignment.symmetrisation import COMBINATIONS
    from nmt.ct2_export import QUANTIZATIONS

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ckpt", required=True, help="a Transformer checkpoint of train.py (or average.py)")
    p.add_argument("--out", required=True, help="the model folder to create (it must not exist)")
    p.add_argument("--quantization", choices=QUANTIZATIONS, default="float32", help="weights as stored")
    p.add_argument("--align-layer", type=int, help="the layer whose attention the engine returns (default: recorded)")
    p.add_argument("--align-head", help="a head of that layer (0, 1, ...) or mean (default: recorded)")
    p.add_argument("--align-readout", choices=READOUTS, help="the readout translate.py applies by default")
    p.add_argument("--align-links", choices=COMBINATIONS, help="how translate.py reads links by default")
    p.add_argument(
        "--max-positions",
        type=int,
        help="positions the engine's tables hold: its longest line and output, end of sentence included (default: "
        "the model's max_positions; with sinusoidal positions any number, e.g. 4096 for longer lines)",
    )
    args = rendered(p).parse_args(argv)

    def export() -> None:
        from nmt import checkpoint
        from nmt.bounds import Range
        from nmt.cli.options import MAX_LENGTH, alignment_choice, output_file
        from nmt.ct2_export import check_export, export

        if args.max_positions is not None:  # a line and its end of sentence, up to the longest translate.py reads
            Range(2, MAX_LENGTH + 1, integer=True).check("--max-positions", args.max_positions)
        if Path(args.out).exists():  # a checkpoint, an earlier export: nothing is written over
            raise ValueError(f"--out {args.out}: already exists; give a new folder (nothing was written)")
        output_file("--out", args.out)  # its folder is there and writable
        check_export(args.out, args.quantization)  # before the checkpoint loads
        loaded = checkpoint.load_checkpoint(args.ckpt)
        choice = alignment_choice(args, loaded.checkpoint.alignment)
        print(export(loaded, args.out, args.quantization, choice, args.max_positions))

    return run(export)


if __name__ == "__main__":
    sys.exit(main())
