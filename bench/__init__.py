"""The benchmarks: scripts that measure the package and write their figures, with provenance, to bench/results/.

Run each from the repository root as a module, ``python -m bench.<group>.<script> --help``. The groups follow the
headings of docs/benchmarks.md (its index names every script and the page its figures go to):

- ``bench.quality``: what a model reaches (test BLEU after a budget, curves of dev BLEU against minutes, converged);
- ``bench.speed``: training, decoding and data speed, and memory;
- ``bench.alignment``: word alignment from attention beside eflomal, on the Hansards lines;
- ``bench.serving``: the CTranslate2 engine and the server under load;
- ``bench.anchors``: JoeyNMT 2.3.0 beside ours (its environment, training runs, decoding);
- ``bench.gpu``: the one-call GPU check (its pack, steps and summary);
- ``bench.suite``: the test suite's lanes timed, and what it catches (rules broken on purpose).

``bench.common`` holds what the scripts share (options, inputs, config composition, timing, ``write_json``). A
benchmark imports ``nmt`` and ``bench``, never ``nmt.cli`` (a command's ``main()``): it measures the package's parts.
Start reading at ``bench/quality/quality.py``.
"""
