"""Speed: training tokens/s (``train_speed``, ``model_speed``, ``profile_step``), decoding (``decode_speed``,
``long_output``), data preparation and batching (``encode_speed``, ``data_scale``, ``data_stats``, ``id_check``,
``collate_speed``, ``plan_memory``), compiled masks (``compiled_masks``) and a step's host cost (``step_ops``). Figures:
docs/results/speed.md; settings' training steps timed side by side on fixed batches: ``step_speed`` (its settings
and steps ``step_settings``, its batches ``step_batches``)."""
