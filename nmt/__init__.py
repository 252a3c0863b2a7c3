"""French→English neural machine translation with attention that can be seen and read as word alignments.

The folders are layers, each importing only from those below it: the shared root modules (``specials``, ``errors``,
``bounds``, ``progress``, ``hardware``, ``commands``); ``models/`` and ``alignment/``; ``data/``; ``checkpoint``;
``export``; ``inference/``; ``views/`` and ``settings``; ``serving/``; ``training/``; ``cli/`` on top. Each folder's
``__init__`` says what it holds, what it may import and where to start reading; ``docs/architecture.md`` follows each
command through them.
"""
