"""Progress of long work goes to stderr: tqdm's bar on a terminal, log lines with tqdm's meter otherwise."""

import logging
import subprocess
import sys

import pytest

from conftest import ROOT
from nmt.progress import Progress


def test_log_lines_carry_share_amount_time_left_and_rate(caplog):
    with caplog.at_level(logging.INFO, logger="nmt.progress"):
        progress = Progress(4 * 1024**2, "encoding", every=0)  # not a terminal here: log lines
        progress.update(1024**2, count=5000)
        progress.update(1024**2, count=5000)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2  # one per update (every=0); close() would add the closing line
    assert lines[-1].startswith("encoding:  50% 2.00M/4.00M [") and "<" in lines[-1]  # elapsed<left
    assert lines[-1].endswith(" pairs/s") and "B/s" in lines[-1]


def test_silent_when_disabled_or_between_intervals(caplog):
    with caplog.at_level(logging.INFO, logger="nmt.progress"):
        Progress(10, "translating", unit=" sentences", items=None, every=0, enabled=False).update(5, 5)
        slow = Progress(10, "translating", unit=" sentences", items=None, every=3600)
        slow.update(5, 5)
    assert not caplog.records
    assert slow.meter().startswith("translating:  50% 5/10 [") and "pairs" not in slow.meter()


@pytest.mark.slow
def test_translate_py_shows_progress_on_stderr_only(trained, tmp_path):
    (tmp_path / "in.fr").write_text("Le chat dort.\nIl mange.\n")
    ckpt = str(trained["bahdanau"] / "checkpoints" / "last.ckpt")
    cmd = [sys.executable, str(ROOT / "translate.py"), "--ckpt", ckpt, "--input", str(tmp_path / "in.fr")]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 2 and "translating" not in proc.stdout
    assert "translating: 100% 2/2 [" in proc.stderr  # the closing line (not a terminal: no bar)


def test_a_terminal_gets_a_bar_only_when_progress_is_asked_for(monkeypatch):
    import io

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stderr", Terminal())
    assert Progress(10, "translating", unit=" sentences", items=None, enabled=False).bar is None
    shown = Progress(4 * 1024**2, "encoding")
    shown.update(1024**2, count=10)
    shown.close()
    assert "\rencoding:   0%|" in sys.stderr.getvalue() and "/4.00M [" in sys.stderr.getvalue()  # tqdm's bar


def test_the_training_bar_redraws_at_most_ten_times_a_second(monkeypatch):
    """Lightning's bar redraws at every batch; ours at most every 0.1 s, and at every batch of steps slower than that,
    and always at an epoch's last batch."""
    import nmt.training.console as callbacks

    clock = [0.0]
    monkeypatch.setattr(callbacks.time, "monotonic", lambda: clock[0])
    bar = callbacks.ProgressBar()
    fast = []
    for n in range(1, 1001):  # 1 ms a step: one second
        clock[0] += 0.001
        fast.append(bar._should_update(n, 1000))
    assert 9 <= sum(fast) <= 11 and fast[-1]
    slow = []
    for n in range(1, 11):  # 0.2 s a step
        clock[0] += 0.2
        slow.append(bar._should_update(n, 10))
    assert all(slow)


def test_a_program_that_runs_for_minutes_shows_its_time_go_by_and_an_iteration_counts_its_items(caplog):
    """#82 §8: eflomal (a program run silently for minutes on a corpus) keeps its bar moving while it runs; an
    iteration (the aligner's tokenising of a corpus) counts what it yields, the last partial stretch too."""
    from nmt.alignment import eflomal

    with caplog.at_level(logging.INFO, logger="nmt.progress"):
        bar = Progress(1, "eflomal on 3 pairs", unit="draws", items=None, every=0)
        done = eflomal._run([sys.executable, "-c", "import time; time.sleep(0.5); print('out')"], bar, every=0.1)
    assert done.returncode == 0 and done.stdout == "out\n"
    assert len(caplog.records) >= 3 and all(r.getMessage().startswith("eflomal on 3 pairs:") for r in caplog.records)
    counted = Progress(2500, "tokenising", unit="pairs", items=None, every=3600)
    assert list(counted.iterate(range(2500), every=1000)) == list(range(2500)) and counted.n == 2500
