"""JoeyNMT 2.3.0, the anchor: its offline environment (``joeynmt_env``), its training run read as a curve
(``joeynmt_curve``), its decoding of our weights (``joeynmt_decode``), its checkpoints scored by our search
(``joeynmt_quality``) and its Transformer's training speed beside ours (``joeynmt_transformer``)."""
