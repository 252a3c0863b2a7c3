"""The translation server: the web application on FastAPI (``server.py``), the translation service behind it
(``service.py``) and dynamic batching of concurrent requests (``batcher.py``).

May import: nmt.specials, nmt.errors, nmt.progress, nmt.hardware, nmt.commands, nmt.scores, nmt.bounds, nmt.models,
nmt.alignment, nmt.arguments, nmt.data, nmt.config_keys, nmt.checkpoint, nmt.ct2_export, nmt.inference, nmt.views,
nmt.settings.
Start with: server.py (the routes), then service.py.
"""
