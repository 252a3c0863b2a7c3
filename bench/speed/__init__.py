"""Speed: training tokens/s (``train_speed``, ``model_speed``, ``profile_step``), decoding (``decode_speed``,
``long_output``), data preparation and batching (``encode_speed``, ``data_scale``, ``data_stats``, ``id_check``) and
compiled masks (``compiled_masks``). Figures: docs/results/speed.md."""
