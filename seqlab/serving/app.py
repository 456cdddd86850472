"""The HTTP JSON API over a saved model (FastAPI): the app of one server process.

    POST /predict  {"sentences": ["EU rejects German call ."], "nbest": null, "confidence": true}
        -> {"predictions": [{"tokens": [...], "tags": [...], "spans": [{..., "confidence": 0.98}], ...}]}
    GET  /         the web viewer: type text, see entities by type with confidences, n-best, attention maps
    GET  /info     model description
    GET  /health   {"status": "ok"}
    GET  /docs, /openapi.json   the schema

Every request is bounded (:class:`Limits`): too many sentences or characters, or a body over the byte limit,
get HTTP 413; malformed input gets 422 with the offending field and no echo of the input; a string with a
lone surrogate or a NUL character, or a non-finite number, is malformed. Nothing from a request reaches a
file path or model loading. Errors are JSON: ``{"error": "..."}`` (413), ``{"detail": [{"loc", "msg",
"type"}]}`` (422 for malformed requests) or ``{"detail": "..."}`` (422 for input the model cannot tag).

:mod:`seqlab.serving.serve` runs this app in one process, or in N worker processes
(:func:`app_from_env`).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import os
import re
import sys
from dataclasses import asdict, dataclass
from importlib import resources
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from seqlab.errors import SeqlabError
from seqlab.runtime.cost import OverBudget
from seqlab.runtime.heap import freeze_loaded
from seqlab.serving.batcher import MicroBatcher
from seqlab.tagger import Tagger
from seqlab.tagging.encoding import as_sentences


@dataclass(frozen=True)
class Limits:
    """What one request may hold; over any of them it gets HTTP 413 (``seqlab serve --max-sentences``,
    ``--max-chars``, ``--max-body-bytes``)."""

    max_sentences: int = 1000  # per request
    max_chars: int = 200_000  # characters of text or tokens per request
    max_body_bytes: int = 2_000_000  # request body

    #: The allowed range of each field (the command line checks its flags against these).
    RANGES: ClassVar[dict[str, tuple[int, int]]] = {
        "max_sentences": (1, 1_000_000),
        "max_chars": (1, 100_000_000),
        "max_body_bytes": (1, 1_000_000_000),
    }

    def __post_init__(self) -> None:
        for name, (low, high) in self.RANGES.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise SeqlabError(f"serve: {name} must be an integer in {low}..{high}, got {value!r}")

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls, text: str) -> Limits:
        try:
            raw = json.loads(text)
        except ValueError:
            raw = None
        if not isinstance(raw, dict) or set(raw) != set(cls.RANGES):
            raise SeqlabError(f"{ENV_LIMITS}: expected a JSON object with {', '.join(cls.RANGES)}")
        return cls(**raw)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _clean(text: str) -> str:
    if _SURROGATE.search(text):
        raise ValueError("text holds a lone surrogate (not valid Unicode)")
    if "\x00" in text:
        raise ValueError("text holds a NUL character")
    return text


class BodyLimit:
    """Pure ASGI middleware: a body over ``limit`` bytes, declared or streamed (chunked), gets HTTP 413 before
    the endpoint parses it. Starlette's ``@app.middleware("http")`` would also do, but it runs every response
    through an extra task and memory stream; this reads the body once and replays it to the app.

    A declared body over the limit is answered at once, before a byte of it is read, and the rest of the body
    is then read and dropped (at most :attr:`DRAIN_BYTES`, for at most :attr:`DRAIN_S` seconds) before the
    response ends: most clients send the whole body before they read the answer, and a server that closes the
    connection (``Connection: close``, HTTP/1.0) with bytes of it unread makes the kernel reset the connection,
    so that the client gets a reset instead of the 413, whatever the size. A client that waits for
    ``100 Continue`` sends no body and is not drained."""

    DRAIN_BYTES: ClassVar[int] = 1 << 30
    DRAIN_S: ClassVar[float] = 60.0

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            drain = headers.get(b"expect", b"").lower() != b"100-continue"
            return await self._refuse(receive, send, drain)
        if scope["method"] != "POST":
            return await self.app(scope, receive, send)
        chunks, size = [], 0
        while True:  # a chunked body has no content-length: count it
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before its body was read
            size += len(message.get("body", b""))
            if size > self.limit:
                return await self._refuse(receive, send, drain=message.get("more_body", False))
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()  # later reads wait for the disconnect, as the server would give it

        await self.app(scope, replay, send)

    async def _refuse(self, receive, send, drain: bool) -> None:
        """Send the 413 and its JSON error, then (``drain``) read and drop the rest of the body before ending the
        response, so that the connection closes cleanly once the client has sent it."""
        body = json.dumps({"error": f"request body over {self.limit} bytes"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body, "more_body": drain})
        if drain:
            await self._drain(receive)
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _drain(self, receive) -> None:
        """Read the request's body to its end and drop it: at most :attr:`DRAIN_BYTES` bytes, for at most
        :attr:`DRAIN_S` seconds (past either, the connection is closed with the rest unread)."""
        loop = asyncio.get_running_loop()
        deadline, drained = loop.time() + self.DRAIN_S, 0
        while drained <= self.DRAIN_BYTES:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                return
            if message["type"] != "http.request" or not message.get("more_body", False):
                return
            drained += len(message.get("body", b""))


class PredictRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sentences: list[str | list[str]] = Field(..., min_length=1, description="raw strings or token lists")
    nbest: int | None = Field(None, ge=1, le=50, description="also return the k best tag sequences")
    confidence: bool = Field(True, description="span and token probabilities where the decoder has them")
    explain: bool = Field(False, description="attention weights and fusion gates of attention models")

    @field_validator("sentences")
    @classmethod
    def _valid_text(cls, sentences: list) -> list:
        for item in sentences:
            for text in [item] if isinstance(item, str) else item:
                _clean(text)
                if not isinstance(item, str) and not text.strip():
                    raise ValueError("a token must be a non-empty string without only spaces")
        return sentences


def _over_budget(err: OverBudget) -> str:
    """The 413 message of a request over the memory budget: which sentence, what it needs, what fits."""
    if err.index is None:
        return f"{err.reason}: send fewer or shorter sentences"
    return f"sentence {err.index + 1}: {err.reason}; send it in pieces of at most {err.fits} tokens"


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def http_stack() -> dict[str, str]:
    """What uvicorn's 'auto' settings pick: the C parser and event loop of ``seqlab[serve]`` when installed
    (httptools, uvloop), else the pure-Python h11 and asyncio, which cost several times more CPU per request."""
    found = {name: importlib.util.find_spec(name) is not None for name in ("httptools", "uvloop")}
    return {"http": "httptools" if found["httptools"] else "h11", "loop": "uvloop" if found["uvloop"] else "asyncio"}


def create_app(tagger: Tagger, limits: Limits = Limits(), max_batch: int = 64, max_wait_ms: float = 5.0):
    """The app; concurrent requests are micro-batched (:class:`~seqlab.serving.batcher.MicroBatcher`): up to
    ``max_batch`` sentences collected for at most ``max_wait_ms`` go through the network in one call."""
    try:
        from fastapi import FastAPI, HTTPException, Request
        from fastapi.exceptions import RequestValidationError
        from fastapi.responses import HTMLResponse, JSONResponse
    except ImportError:  # pragma: no cover - optional dependency
        raise SeqlabError("serving needs FastAPI: pip install 'seqlab[serve]'") from None
    if needs := tagger.columns():
        name, n = next(iter(needs.items()))
        raise SeqlabError(
            f"this model's feature '{name}' reads {n} column{'s' if n > 1 else ''} of the input besides the token, "
            "and requests carry tokens only: tag column files with `seqlab predict` instead"
        )
    app = FastAPI(title="seqlab", version=tagger.info()["seqlab_version"])

    app.add_middleware(BodyLimit, limit=limits.max_body_bytes)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, err: RequestValidationError):
        details = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", "invalid"), "type": e.get("type", "")}
            for e in err.errors()[:10]
        ]  # never the input itself: it may be megabytes
        return JSONResponse({"detail": details}, status_code=422)

    def run(sentences: list, options: tuple) -> list[dict]:  # the requests of a micro-batch, each linked apart
        nbest, explain, confidence = options
        preds = tagger.predict(sentences, nbest=nbest, explain=explain, confidence=confidence, link=False)
        return [p.to_dict() for p in preds]

    batcher = MicroBatcher(run, max_batch, max_wait_ms / 1000.0)
    app.state.batcher = batcher
    page = (resources.files("seqlab") / "resources" / "viewer.html").read_text(encoding="utf-8")

    @app.get("/", response_class=HTMLResponse)
    def viewer() -> str:
        return page

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok"}

    @app.get("/info")
    def info() -> dict:
        return {
            **tagger.info(),
            "limits": limits.__dict__,
            "batching": {
                "max_batch": max_batch,
                "max_wait_ms": max_wait_ms,
                "network_calls": batcher.calls,
                "threads": _torch_threads(),
            },
            "server": {**http_stack(), "pid": os.getpid()},
        }

    @app.post("/predict")
    async def predict(req: PredictRequest) -> dict:  # the network runs in the batcher's thread
        if len(req.sentences) > limits.max_sentences:
            return JSONResponse(
                {"error": f"{len(req.sentences)} sentences; at most {limits.max_sentences} per request"},
                status_code=413,
            )
        chars = sum(len(s) if isinstance(s, str) else sum(map(len, s)) for s in req.sentences)
        if chars > limits.max_chars:
            return JSONResponse(
                {"error": f"{chars} characters; at most {limits.max_chars} per request"}, status_code=413
            )
        try:
            sentences = as_sentences(req.sentences, tagger.config.data)
            tagger.link(sentences)  # a request's sentences are each other's context, never another request's
            preds = await batcher.submit(sentences, (req.nbest, req.explain, req.confidence))
        except OverBudget as err:  # over the tagger's memory budget (seqlab.runtime.cost), refused before it allocates
            return JSONResponse({"error": _over_budget(err)}, status_code=413)
        except SeqlabError as err:
            raise HTTPException(status_code=422, detail=str(err)) from None
        return {"predictions": preds}

    return app


# What `seqlab serve --workers N` hands each worker process (they inherit the parent's environment).
ENV_MODEL, ENV_MAX_BATCH, ENV_MAX_WAIT_MS, ENV_THREADS, ENV_ENGINE, ENV_LIMITS, ENV_DEVICE = (
    "SEQLAB_SERVE_MODEL",
    "SEQLAB_SERVE_MAX_BATCH",
    "SEQLAB_SERVE_MAX_WAIT_MS",
    "SEQLAB_SERVE_THREADS",
    "SEQLAB_SERVE_ENGINE",
    "SEQLAB_SERVE_LIMITS",
    "SEQLAB_SERVE_DEVICE",
)


def app_from_env():
    """The app of one worker of ``seqlab serve --workers N``: uvicorn imports this factory by name in each
    worker process (``seqlab.serving.app:app_from_env``) and calls it. The model folder and options come from
    ``SEQLAB_SERVE_MODEL``, ``SEQLAB_SERVE_MAX_BATCH``, ``SEQLAB_SERVE_MAX_WAIT_MS``, ``SEQLAB_SERVE_THREADS``
    (PyTorch threads of this worker), ``SEQLAB_SERVE_ENGINE`` (torch or onnxruntime), ``SEQLAB_SERVE_DEVICE``
    (cpu, cuda or auto; default cpu) and ``SEQLAB_SERVE_LIMITS`` (:class:`Limits` as JSON). A model that cannot
    be loaded ends the worker with uvicorn's start-up failure status, which stops the supervisor instead of
    restarting the worker forever."""
    try:
        model = os.environ.get(ENV_MODEL)
        if not model:
            raise SeqlabError(f"{ENV_MODEL} is not set: the model folder to serve")
        options = {}
        for name, key, parse in [
            ("max_batch", ENV_MAX_BATCH, int),
            ("max_wait_ms", ENV_MAX_WAIT_MS, float),
            ("threads", ENV_THREADS, int),
        ]:
            if os.environ.get(key):
                try:
                    options[name] = parse(os.environ[key])
                except ValueError:
                    raise SeqlabError(f"{key}: expected a number, got '{os.environ[key]}'") from None
        if os.environ.get(ENV_LIMITS):
            options["limits"] = Limits.from_env(os.environ[ENV_LIMITS])
        if "threads" in options:
            import torch

            torch.set_num_threads(max(1, options.pop("threads")))
        tagger = Tagger.load(model, os.environ.get(ENV_DEVICE) or "cpu", os.environ.get(ENV_ENGINE) or "torch")
        app = create_app(tagger, **options)
        freeze_loaded()  # this worker serves until it exits
        return app
    except SeqlabError as err:
        from uvicorn.config import STARTUP_FAILURE

        logging.getLogger("uvicorn.error").error("error: %s", err)
        sys.exit(STARTUP_FAILURE)
