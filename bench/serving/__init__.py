"""Deploying: the CTranslate2 engine against PyTorch and JoeyNMT's decoding (``engine``) and the server under load
(``serve_load``). Figures: docs/ct2.md and docs/serving.md."""
