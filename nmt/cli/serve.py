"""Serve a checkpoint over HTTP: a JSON API, OpenNMT-py's REST format and a page that shows the attention.

    python serve.py --ckpt best.ckpt                      # http://127.0.0.1:8080/ (the page), POST /translate
    python serve.py --ckpt a.ckpt b.ckpt --beam-size 5    # an ensemble, as translate.py
    python serve.py --ckpt fr-en.ckpt --reverse-ckpt en-fr.ckpt   # a ref is aligned by both models, symmetrised
    curl -s localhost:8080/translate -H 'content-type: application/json' -d '{"src": ["Bonjour !"]}'

Binds the loopback address unless --host says otherwise. SIGTERM or Ctrl-C: stop accepting, answer the
requests in flight, exit 0.
"""

from __future__ import annotations

import argparse
import logging
import signal
import socket
import sys
from dataclasses import dataclass, replace
from typing import Any

from nmt.bounds import POSITIVE, Range
from nmt.cli.options import (
    Needs,
    add_model_options,
    add_reverse_options,
    alignment_choice,
    batching,
    check_args,
    check_beam,
    load_reverse,
    option,
    parse,
    refuse_ignored,
    search_options,
    symmetrisation,
    translation_model,
)
from nmt.commands import program_name
from nmt.errors import run

log = logging.getLogger("serve")


def _parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from nmt.serving.server import Limits

    limits = Limits()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_options(p)
    add_reverse_options(p, "for requests with ref (to align)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    p.add_argument("--port", type=int, default=8080, help="0: any free port (the one taken is printed)")
    p.add_argument("--max-wait-ms", type=float, default=5.0, help="how long a batch gathers after its first line")
    p.add_argument("--batch-tokens", type=int, default=2048, help="source tokens a gathered batch holds at most")
    p.add_argument("--no-batching", action="store_true", help="translate every request alone, at once")
    p.add_argument("--max-queue", type=int, default=limits.max_queue, help="lines waiting; beyond: 503")
    p.add_argument("--max-lines", type=int, default=limits.max_lines, help="lines a request may hold")
    p.add_argument("--max-chars", type=int, default=limits.max_chars, help="characters a line may hold")
    p.add_argument("--max-body", type=int, default=limits.max_body, help="bytes a request body may hold")
    p.add_argument("--max-beam", type=int, default=limits.max_beam, help="the largest beam a request may ask")
    p.add_argument("--body-timeout", type=float, default=limits.body_timeout,
                   help="seconds a request body may take to arrive in full; beyond: 408")  # fmt: skip
    p.add_argument("--no-access-log", action="store_true", help="do not log every request")
    return parse(p, argv)


NEEDS = (  # what each option needs to do anything
    Needs(("symmetrisation",), lambda a: bool(a.reverse_ckpt), "only with --reverse-ckpt: it combines the links of "
          "two models"),  # fmt: skip
    Needs(("max_wait_ms", "batch_tokens"), lambda a: not a.no_batching, "not with --no-batching, which translates "
          "every request alone, at once"),  # fmt: skip
)


SERVER_RANGES = {
    "port": Range(0, 65535, integer=True),
    "max_wait_ms": Range(0, 60_000),  # a lone request waits this long: a minute at most
    "batch_tokens": POSITIVE,
    "max_queue": POSITIVE,
    "max_lines": POSITIVE,
    "max_chars": POSITIVE,
    "max_body": POSITIVE,
    "max_beam": POSITIVE,  # and at most half the model's target vocabulary (checked once it loads)
    "body_timeout": Range(0, 3_600, lo_open=True),  # a stalled client holds a shutdown this long: an hour at most
}


def check_server_args(args: argparse.Namespace) -> None:
    """One line for an option that would do nothing or a value out of its range, before anything loads."""
    refuse_ignored(args, NEEDS)
    check_args(args)
    for dest, allowed in SERVER_RANGES.items():
        allowed.check(option(dest), getattr(args, dest))
    if args.beam_size > args.max_beam:
        raise ValueError(f"--beam-size={args.beam_size}: must be at most --max-beam ({args.max_beam})")


def bind(host: str, port: int) -> socket.socket:
    """A listening socket (before the model loads, so a taken port fails at once)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise OSError(f"--host {host} --port {port}: cannot listen there ({e.strerror})") from None
    return sock


@dataclass
class Prepared:
    """A server ready to run: its listening socket, its app and the batcher behind it, and uvicorn's settings."""

    sock: socket.socket
    app: Any
    batcher: Any
    config: Any


def prepared_server(args: argparse.Namespace) -> Prepared:
    """Every option checked, the socket bound and the model loaded as ``args`` say: all but the serving itself."""
    check_server_args(args)
    try:
        import fastapi  # noqa: F401
        import uvicorn
    except ImportError as e:
        needs = f"{program_name('serve')} needs {e.name}, not installed"
        raise ValueError(f"{needs}: pip install 'nmt-attention[serve]'") from None
    sock = bind(args.host, args.port)
    try:
        from nmt.serving.batcher import Batcher
        from nmt.serving.server import Limits, create_app
        from nmt.serving.service import TranslationService

        limits = Limits(args.max_body, args.max_lines, args.max_chars, args.max_beam, args.max_queue,
                        args.body_timeout)  # fmt: skip
        loaded = translation_model(args)
        if "max_beam" not in args.given:  # the default, no more than the model's vocabulary allows
            args.max_beam = min(args.max_beam, loaded.tokenizer.tgt_vocab_size // 2)
            limits = replace(limits, max_beam=args.max_beam)
        check_beam(args, loaded, ("max_beam", "beam_size"))
        choice, reverse = alignment_choice(args, loaded.recorded), load_reverse(args, loaded)
        service = TranslationService(loaded, search_options(args), batching(args), choice, reverse,
                                     symmetrisation(args))  # fmt: skip
        batcher = Batcher(  # each request's tokens are counted once, where its lines are checked (nmt.serving.server)
            service.run,
            max_wait=args.max_wait_ms / 1000,
            max_tokens=args.batch_tokens,
            max_queue=limits.max_queue,
            enabled=not args.no_batching,
        )
    except BaseException:
        sock.close()
        raise
    app = create_app(service, batcher, limits)
    config = uvicorn.Config(app, log_level="info", access_log=not args.no_access_log, timeout_graceful_shutdown=None)
    return Prepared(sock, app, batcher, config)


def serve(args: argparse.Namespace) -> int:
    import uvicorn

    ready = prepared_server(args)
    host, port = ready.sock.getsockname()[:2]
    print(f"listening on http://{host if ':' not in host else f'[{host}]'}:{port}/", file=sys.stderr, flush=True)
    # uvicorn stops gracefully on SIGTERM/SIGINT, then raises the signal again for the handler it found: a
    # handler that does nothing lets the process end with 0 after the requests in flight were answered
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    uvicorn.Server(ready.config).run(sockets=[ready.sock])
    stats = ready.batcher.stats
    print(f"stopped: {stats.requests} requests, {stats.lines} lines answered", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stderr)
    return run(lambda: serve(args))


if __name__ == "__main__":
    sys.exit(main())
