"""A callback for the multi-node tests (``+callbacks.probe._target_=ddp_probe.Probe +callbacks.probe.out=DIR``):
each rank writes the sentence ids of every training batch it reads, and a hash of its weights at the end."""

import hashlib
import json
from pathlib import Path

import lightning as L


class Probe(L.Callback):
    def __init__(self, out: str):
        self.out = Path(out)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.out.mkdir(parents=True, exist_ok=True)
        record = {"step": trainer.global_step, "ids": batch.idx.tolist()}
        with open(self.out / f"batches.{trainer.global_rank}.jsonl", "a") as f:
            f.write(json.dumps(record) + "\n")

    def on_train_end(self, trainer, pl_module):
        digest = hashlib.sha256()
        for name, tensor in sorted(pl_module.state_dict().items()):
            digest.update(name.encode() + tensor.detach().cpu().numpy().tobytes())
        (self.out / f"weights.{trainer.global_rank}").write_text(digest.hexdigest())
