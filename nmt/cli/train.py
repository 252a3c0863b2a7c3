"""Train a French→English attention NMT model.

python train.py                                  # Bahdanau model on the built-in corpus
python train.py model=luong                      # the scaled-dot / look-ahead variant
python train.py experiment=tatoeba_bahdanau      # the reference setting on real data
python train.py ckpt_path=runs/.../checkpoints/last.ckpt   # resume
"""

from __future__ import annotations

from pathlib import Path

import hydra
from omegaconf import DictConfig

# the Hydra configuration: the repository's conf/, which the package carries as nmt/conf (a link in the repository)
CONFIG_DIR = Path(__file__).resolve().parents[1] / "conf"


@hydra.main(config_path=str(CONFIG_DIR), config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    from nmt.errors import one_line_errors
    from nmt.training.run import train

    with one_line_errors():
        return train(cfg)


if __name__ == "__main__":
    main()
