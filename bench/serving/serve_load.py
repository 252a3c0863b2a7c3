"""The translation server under load, on loopback: sentences/s and latency at 1, 8 and 32 concurrent clients, each
sending one sentence a request, with dynamic batching on and off, against translate.py on the same file.

    python -m bench.serving.serve_load --ckpt runs/bench_quality_transformer_small/checkpoints/best-658.ckpt
        [--data DIR] [--clients 1 8 32] [--budget 60] [--json bench/results/serve_load.json]

--data is a folder with the splits train.tsv, valid.tsv and test.tsv (default data/fra-eng), e.g. a copy of the
Tatoeba splits; its test split is what is sent.

translate.py's figure is its batched translation of the whole test split (``Translator`` with translate.py's
defaults: beam 5, batches of 4,000 source tokens x beam), model loading excluded. Each server (``serve.py`` in
its own process, the same search defaults) is started once per batching mode; every client count then sends
the test sentences in order, one a request over a keep-alive connection per client, until they are all done or
``--budget`` seconds have passed (it stops by itself), and every answer is checked against translate.py's line.
The clients are threads of this process, on the same 2 cores as the server.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time

import torch

from bench.common import ROOT, options, table, write_json
from nmt.data.readers import read_tsv
from nmt.inference.loading import load_model
from nmt.inference.translator import Translator


def baseline(ckpt: str, sentences: list[str]) -> tuple[float, list[str]]:
    """translate.py's way: every line in one call, its default search and batching; seconds and the outputs."""
    loaded = load_model([ckpt], torch.device("cpu"))  # a checkpoint or an exported model, as serve.py loads it
    translator = Translator(loaded.model, loaded.tokenizer, alignment=loaded.resolve(loaded.recorded))
    t = time.perf_counter()
    out = [r.text for r in translator.translate(sentences)]
    return time.perf_counter() - t, out


class Server:
    def __init__(self, ckpt: str, *args: str):
        cmd = [sys.executable, str(ROOT / "serve.py"), "--ckpt", ckpt, "--port", "0", "--no-access-log", *args]
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        for line in self.proc.stderr:
            if m := re.search(r"listening on http://127\.0\.0\.1:(\d+)/", line):
                self.port = int(m.group(1))
                break
        else:
            raise SystemExit("serve.py did not start")
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()
        while True:
            try:
                self.get("/health")
                return
            except OSError:
                time.sleep(0.1)

    def get(self, path: str) -> dict:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        conn.request("GET", path)
        return json.loads(conn.getresponse().read())

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(120)


def load(server: Server, sentences: list[str], expected: list[str], clients: int, budget: float) -> dict:
    """``clients`` threads send the sentences in order, one a request, until done or ``budget`` seconds."""
    lock, next_index, latencies, wrong = threading.Lock(), [0], [], []
    deadline = time.perf_counter() + budget

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
        while time.perf_counter() < deadline:
            with lock:
                i = next_index[0]
                next_index[0] += 1
            if i >= len(sentences):
                return
            t = time.perf_counter()
            body = json.dumps({"src": [sentences[i]]})
            conn.request("POST", "/translate", body, {"Content-Type": "application/json"})
            response = conn.getresponse()
            body = json.loads(response.read())
            latency = time.perf_counter() - t
            with lock:
                latencies.append(latency)
                if response.status != 200 or body["translations"][0]["tgt"] != expected[i]:
                    wrong.append(i)

    before = server.get("/health")
    threads = [threading.Thread(target=client) for _ in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    after = server.get("/health")
    batches, busy = after["batches"] - before["batches"], after["busy_s"] - before["busy_s"]
    ms = sorted(1000 * x for x in latencies)
    pct = lambda q: round(ms[min(len(ms) - 1, int(q * len(ms)))], 1)  # noqa: E731
    return {
        "clients": clients,
        "sentences": len(latencies),
        "seconds": round(elapsed, 2),
        "sentences_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(statistics.median(ms), 1),
        "p95_ms": pct(0.95),
        "p99_ms": pct(0.99),
        "mean_batch_lines": round((after["lines"] - before["lines"]) / batches, 2) if batches else 0,
        "busy_share": round(busy / elapsed, 3),  # of the time, the share the server's worker spent translating
        "sentences_per_busy_s": round((after["lines"] - before["lines"]) / busy, 1) if busy else 0,
        "wrong_answers": len(wrong),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    options(p, "ckpt", "data")
    p.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--budget", type=float, default=60, help="seconds at most per client count and batching mode")
    p.add_argument("--batching", nargs="+", choices=["on", "off"], default=["on", "off"])
    options(p, "sentences", "json")
    args = p.parse_args()

    sentences = list(read_tsv(args.data / "test.tsv").src)[: args.sentences]
    threads = torch.get_num_threads()  # the server's and the baseline's (an exported model: its replicas)
    seconds, expected = baseline(args.ckpt, sentences)
    reference = {"sentences": len(sentences), "seconds": round(seconds, 2), "sentences_per_s": len(sentences) / seconds}
    print(f"translate.py (batched): {reference['sentences_per_s']:.1f} sentences/s on {len(sentences)} sentences")
    rows = []
    for mode in args.batching:
        server = Server(args.ckpt, *([] if mode == "on" else ["--no-batching"]))
        try:
            for clients in args.clients:
                row = {"batching": mode, **load(server, sentences, expected, clients, args.budget)}
                row["share_of_translate_py"] = round(row["sentences_per_s"] / reference["sentences_per_s"], 3)
                rows.append(row)
                print(row, flush=True)
        finally:
            server.stop()
    print(table(rows, list(rows[0])))
    write_json(
        args.json,
        {
            "ckpt": args.ckpt,
            "threads": threads,
            "translate_py": reference,
            "budget_s": args.budget,
            "rows": rows,
        },
    )


if __name__ == "__main__":
    main()
