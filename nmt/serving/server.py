"""The translation server's web application (FastAPI on uvicorn): a JSON API, OpenNMT-py's REST format, and a page
that translates what one types and draws its attention with the viewer's template.

FastAPI because it checks request bodies against typed models (one-line errors naming the field come from
its validation), limits body sizes, describes the API (``/openapi.json``) and runs on uvicorn, which serves
HTTP/1.1 with keep-alive and shuts down gracefully (stop accepting, finish what is in flight). Translation
never runs on the event loop: :class:`~nmt.serving.batcher.Batcher` batches the lines of concurrent requests and runs
them in its worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from nmt.commands import named_as_started
from nmt.errors import one_line
from nmt.serving.batcher import Batcher, QueueFull
from nmt.serving.service import Options, TranslationService
from nmt.views.viewer import render

# the page loads nothing from anywhere: its script and styles are inline, it talks to this server only
PAGE_POLICY = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'"


@dataclass(frozen=True)
class Limits:
    """What one request may ask (over a limit: 413 or 422 with one line) and how much may wait (over: 503)."""

    max_body: int = 1_000_000  # bytes of a request body
    max_lines: int = 64  # lines of one request
    max_chars: int = 2_000  # characters of one line
    max_beam: int = 16
    max_queue: int = 1_024  # lines waiting for a batch, all requests together
    body_timeout: float = 30.0  # seconds a request's body may take to arrive in full (beyond: 408)

    def __post_init__(self):
        if self.max_lines > self.max_queue:
            raise ValueError(f"--max-lines={self.max_lines}: must be at most --max-queue ({self.max_queue})")


class BadRequest(Exception):
    """A request the server refuses: its status and one line naming the field."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class TranslateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    src: list[str] = Field(description="French lines, each translated on its own")
    ref: list[str] | None = Field(
        None,
        description=named_as_started(
            "English translations of src, line for line: aligned (forced decoding, as align.py aligns) instead of "
            "translated; each answer's tgt is its ref, with its word links"
        ),
    )
    beam_size: int | None = Field(None, description="1 for greedy search; default: the server's --beam-size")
    nbest: int | None = Field(None, description="translations per line, best first; at most beam_size")
    attention: bool = Field(False, description="add each line's attention in the viewer's format")


class OpenNMTItem(BaseModel):
    """One line in OpenNMT-py's REST format; ``id`` names a model there, here there is one."""

    model_config = ConfigDict(extra="forbid", strict=True)

    src: str
    id: int = 0


def create_app(service: TranslationService, batcher: Batcher, limits: Limits = Limits()) -> FastAPI:
    """The application; ``batcher`` runs ``service.run`` and is started and stopped with it."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await batcher.start()
        yield
        await batcher.stop()

    app = FastAPI(
        title="French→English translation",
        lifespan=lifespan,
        docs_url=None,  # Swagger UI and ReDoc load scripts from the network; /openapi.json describes the API
        redoc_url=None,
    )
    app.add_middleware(BodyLimit, limit=limits.max_body, timeout=limits.body_timeout)
    add_error_handlers(app)

    async def translate(lines: list[str], options: Options, field: str) -> list[dict[str, Any]]:
        tokens = check_lines(lines, field, limits, service.cost)
        return await batcher.submit(options, lines, tokens)

    @app.post("/translate")
    async def translate_lines(request: TranslateRequest) -> dict[str, Any]:
        """Each line's translation, score and n-best (and its attention when asked), in order."""
        options = request_options(request, service.defaults, limits)
        if request.ref is None:
            return {"translations": await translate(request.src, options, "src")}
        tokens = check_refs(request.ref, request.src, limits, service)
        pairs = list(zip(request.src, request.ref))
        return {"translations": await batcher.submit(replace(options, align=True), pairs, tokens)}

    @app.post("/translator/translate")
    async def translate_opennmt(items: list[OpenNMTItem]) -> list[list[dict[str, Any]]]:
        """OpenNMT-py's answer: a list per rank of the n-best, each with an entry per line."""
        options = service.defaults
        answers = await translate([item.src for item in items], options, "")
        # a line translated in parts may have fewer hypotheses than the n-best asks: its last one fills the rank
        # (an empty line has one per rank: the empty translation)
        return [[opennmt_answer(item, a["nbest"][min(k, len(a["nbest"]) - 1)], options.nbest)
                 for item, a in zip(items, answers)] for k in range(options.nbest)]  # fmt: skip

    @app.get("/health")
    @app.get("/translator/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", **batcher.stats.as_dict()}

    @app.get("/model")
    async def model() -> dict[str, Any]:
        return service.info

    page = render(page_data(service, limits))

    @app.get("/", response_class=HTMLResponse)
    async def index() -> HTMLResponse:
        return HTMLResponse(page, headers={"Content-Security-Policy": PAGE_POLICY})

    return app


def opennmt_answer(item: OpenNMTItem, hypothesis: dict[str, Any], nbest: int) -> dict[str, Any]:
    return {"src": item.src, "tgt": hypothesis["tgt"], "n_best": nbest, "pred_score": hypothesis["score"]}


def page_data(service: TranslationService, limits: Limits) -> dict[str, Any]:
    """The viewer's data for the server's page: no sentences yet, and what its form may ask."""
    checkpoints = " + ".join(c["file"] for c in service.info["checkpoints"])
    live = {"beam_size": service.defaults.beam_size, "nbest": service.defaults.nbest, "max_beam": limits.max_beam}
    live |= {"max_lines": limits.max_lines, "max_chars": limits.max_chars}
    return {"title": f"French → English: {checkpoints}", "steps": [{"label": "", "sentences": []}], "live": live}


def request_options(request: TranslateRequest, defaults: Options, limits: Limits) -> Options:
    """The search a request asks (the server's defaults where it asks none); a field the request's work would not
    use (a search option of a request that aligns) is refused: align.py has no search."""
    if request.ref is not None:
        for name in ("beam_size", "nbest"):
            if getattr(request, name) is not None:
                raise BadRequest(
                    422, f"{name}: not with ref, which aligns each given translation (forced decoding): no search, "
                    "one translation a line"
                )  # fmt: skip
    beam = defaults.beam_size if request.beam_size is None else request.beam_size
    nbest = min(defaults.nbest, beam) if request.nbest is None else request.nbest
    if not 1 <= beam <= limits.max_beam:
        raise BadRequest(422, f"beam_size={beam}: must be an integer in [1, {limits.max_beam}]")
    if not 1 <= nbest <= beam:
        raise BadRequest(422, f"nbest={nbest}: must be an integer in [1, beam_size ({beam})]")
    return Options(beam, nbest, request.attention)


def check_lines(lines: list[str], field: str, limits: Limits, pieces: Callable[[str], int]) -> int:
    """The lines' source pieces, counted once (the batcher's budget reads them); refuse an empty request, too
    many lines or a line too long (naming it). A line with nothing to translate (empty, whitespace, characters
    sentencepiece drops) is answered with an empty translation, as ``translate.py`` answers it."""
    where = (lambda i: f"{field}[{i}]") if field else (lambda i: f"[{i}].src")  # noqa: E731
    if not lines:
        raise BadRequest(422, f"{field or 'body'}: no lines to translate")
    if len(lines) > limits.max_lines:
        raise BadRequest(413, f"{field or 'body'}: {len(lines)} lines, at most {limits.max_lines} a request")
    for i, line in enumerate(lines):
        if len(line) > limits.max_chars:
            raise BadRequest(413, f"{where(i)}: {len(line)} characters, at most {limits.max_chars} a line")
        try:  # JSON may escape what UTF-8 cannot carry (translate.py refuses such a line of a file, naming it)
            line.encode("utf-8")
        except UnicodeEncodeError as e:
            raise BadRequest(422, f"{where(i)}: not valid Unicode (a lone surrogate at character {e.start})") from None
    return sum(pieces(line) for line in lines)


def check_refs(refs: list[str], lines: list[str], limits: Limits, service: TranslationService) -> int:
    """The pairs to align: a translation per source line, each side within the limits a line has, and no pair too
    long to read whole; the sources' pieces (:func:`check_lines`)."""
    if len(refs) != len(lines):
        raise BadRequest(422, f"ref: {len(refs)} lines, but src has {len(lines)}: one per line")
    check_lines(refs, "ref", limits, lambda line: 0)
    tokens = check_lines(lines, "src", limits, service.cost)
    if (too_long := service.long_pair(lines, refs)) is not None:
        raise BadRequest(422, too_long)
    return tokens


def field_name(loc: tuple) -> str:
    """``("body", "src", 3)`` -> ``src[3]``; ``("body", 0, "src")`` -> ``[0].src``."""
    name = ""
    for part in loc[1:] if loc and loc[0] == "body" else loc:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name or "body"


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": one_line(message)}, status_code=status, headers=headers)


def add_error_handlers(app: FastAPI) -> None:
    """Every refusal is ``{"error": "<one line>"}`` with its status."""

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0]
        if first.get("type") == "json_invalid":
            return error(400, f"body: invalid JSON ({first.get('ctx', {}).get('error', first['msg'])})")
        return error(422, f"{field_name(tuple(first.get('loc', ())))}: {first['msg']}")

    @app.exception_handler(BadRequest)
    async def refused(request: Request, exc: BadRequest) -> JSONResponse:
        return error(exc.status, str(exc))

    @app.exception_handler(QueueFull)
    async def busy(request: Request, exc: QueueFull) -> JSONResponse:
        return error(503, str(exc), {"Retry-After": str(exc.retry_after)})

    @app.exception_handler(HTTPException)
    async def http(request: Request, exc: HTTPException) -> JSONResponse:
        detail = str(exc.detail)
        if exc.status_code == 400:  # FastAPI could not parse the body: why, from what it raised
            nested = isinstance(exc.__cause__, RecursionError)
            detail = "body: JSON nested too deeply" if nested else "body: not JSON in UTF-8"
        return error(exc.status_code, detail, getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def bug(request: Request, exc: Exception) -> JSONResponse:
        return error(500, f"internal error: {type(exc).__name__}: {str(exc)[:200]}")


class BodyLimit:
    """Reads a request's body whole before the application sees it, and answers 413 (one JSON line) as soon as it
    passes ``limit`` bytes, whether its length was announced or not: memory per request stays bounded. A body
    that has not arrived in full ``timeout`` seconds after its request began (a client that sent half of it, or
    announced more than it sends) is answered 408 and its connection closed, so it holds nothing for long, a
    graceful shutdown included."""

    def __init__(self, app: ASGIApp, limit: int, timeout: float):
        self.app, self.limit, self.timeout = app, limit, timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        announced = dict(scope["headers"]).get(b"content-length", b"0")
        too_large = error(413, f"body: more than {self.limit} bytes")
        if announced.isdigit() and int(announced) > self.limit:
            return await too_large(scope, receive, send)
        chunks, size = [], 0
        deadline = asyncio.get_running_loop().time() + self.timeout
        while True:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - asyncio.get_running_loop().time()))
            except asyncio.TimeoutError:  # noqa: UP041 - not the builtin before Python 3.11
                late = error(408, f"body: not received in full within {self.timeout:g} s", {"Connection": "close"})
                return await late(scope, receive, send)
            if message["type"] == "http.disconnect":
                return None
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.limit:
                return await too_large(scope, receive, send)
            if not message.get("more_body"):
                break
        whole: list[Message] = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

        async def replay() -> Message:
            return whole.pop() if whole else await receive()

        return await self.app(scope, replay, send)
