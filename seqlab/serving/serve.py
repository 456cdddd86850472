"""``seqlab serve``: the HTTP app (:mod:`seqlab.serving.app`) run by uvicorn, in one process or several.

``seqlab serve MODEL --workers N`` runs N such servers in processes sharing the port (:mod:`seqlab.serving.supervisor`:
on Linux each worker listens on its own ``SO_REUSEPORT`` socket, so the kernel spreads connections, keep-alive
ones included, over the workers; each worker imports :func:`seqlab.serving.app.app_from_env` by name and builds its own
app, model and micro-batcher from the ``SEQLAB_SERVE_*`` variables the parent set). SIGTERM to the parent stops
every worker gracefully (requests in flight finish) and the parent exits with status 0. A worker whose event
loop sends no heartbeat for ``--worker-timeout`` seconds, or that has not started after
``--worker-start-timeout`` seconds, is killed and replaced (:mod:`seqlab.serving.heartbeat`).
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from seqlab.errors import SeqlabError
from seqlab.runtime.devices import resolve_device
from seqlab.runtime.engine import refuse_off_cpu
from seqlab.runtime.heap import freeze_loaded
from seqlab.serving.app import (
    ENV_DEVICE,
    ENV_ENGINE,
    ENV_LIMITS,
    ENV_MAX_BATCH,
    ENV_MAX_WAIT_MS,
    ENV_MODEL,
    ENV_THREADS,
    Limits,
    create_app,
)
from seqlab.serving.supervisor import REUSE_PORT, Watchdog, bound_socket, supervise
from seqlab.tagger import Tagger

if TYPE_CHECKING:
    import torch


def run_server(
    model: str,
    host: str,
    port: int,
    max_batch: int = 64,
    max_wait_ms: float = 5.0,
    workers: int = 1,
    engine: str = "auto",
    threads: int | None = None,
    access_log: bool = True,
    limits: Limits = Limits(),
    watchdog: Watchdog = Watchdog(),
    device: str = "cpu",
) -> None:
    """Serve until SIGINT or SIGTERM; either stops accepting connections, lets the requests in flight finish
    and exits with status 0 (uvicorn's own server re-raises the signal after its graceful shutdown, so the
    process would end with -15). With ``workers`` > 1, that many processes serve the port
    (:func:`seqlab.serving.app.app_from_env`); the signal goes to the parent, which stops them all, and which kills and
    replaces a worker that the ``watchdog`` judges hung (no heartbeat for its ``timeout_s``, or not started after its
    ``start_timeout_s``). With one process there is no parent to do that, and ``watchdog`` has no effect.

    ``threads``: the network's intra-op threads, shared out among the workers. The default leaves one of
    PyTorch's threads to the event loop (HTTP, JSON): under 16 concurrent clients on 2 cores the network on one
    thread answered 99.5 requests/s against 49.7 on two (BENCHMARKS.md).

    ``device``: where the network runs (cpu, cuda or auto), in every worker. On a GPU the engine is PyTorch's
    (``auto`` falls back to it; ``onnxruntime`` is refused).

    Every start-up failure is a SeqlabError (one ``error:`` line, exit status 2), with or without ``workers``: the
    port and host are checked by binding a socket before the model loads (with one process that socket is the
    one uvicorn serves, so nothing can take the port in between), and a server that fails to start is not left
    to end the process with uvicorn's own status."""
    try:
        import uvicorn
    except ImportError:  # pragma: no cover - optional dependency
        raise SeqlabError("serving needs uvicorn: pip install 'seqlab[serve]'") from None
    import torch

    on = resolve_device(device)  # a device that is not there: one error line before anything starts
    threads = threads or max(1, torch.get_num_threads() - 1)
    if workers > 1:
        _run_workers(
            model, host, port, max_batch, max_wait_ms, workers, on, engine, threads, access_log, limits, watchdog
        )
        return
    torch.set_num_threads(threads)
    sock = bound_socket(host, port, reuse_port=False)  # a port in use or a bad host: one line, before the model
    try:
        app = create_app(Tagger.load(model, on, engine), limits, max_batch=max_batch, max_wait_ms=max_wait_ms)
        freeze_loaded()  # this process serves until it exits
        _serve_on(uvicorn, sock, app, host, port, access_log)
    finally:
        sock.close()


def _serve_on(uvicorn, sock, app, host: str, port: int, access_log: bool) -> None:
    """Run uvicorn's server for ``app`` on the bound socket ``sock`` until a stop signal; one that fails to start
    (the app's start-up) is a SeqlabError, not uvicorn's exit status 3."""
    import contextlib
    import signal

    from uvicorn.config import STARTUP_FAILURE

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self):
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

        async def startup(self, sockets=None) -> None:
            await super().startup(sockets)
            if self.started:  # uvicorn says where it runs only when it binds the socket itself
                logging.getLogger("uvicorn.error").info(
                    "Uvicorn running on http://%s:%d (Press CTRL+C to quit)", f"[{host}]" if ":" in host else host, port
                )

    server = Server(uvicorn.Config(app, host=host, port=port, log_level="info", access_log=access_log))
    try:
        server.run(sockets=[sock])
    except SystemExit as exit_:
        if exit_.code != STARTUP_FAILURE:
            raise
        raise SeqlabError("serve: the server failed to start (its error is logged above)") from None


def _run_workers(
    model: str,
    host: str,
    port: int,
    max_batch: int,
    max_wait_ms: float,
    workers: int,
    device: torch.device,
    engine: str = "auto",
    threads: int = 1,
    access_log: bool = True,
    limits: Limits = Limits(),
    watchdog: Watchdog = Watchdog(),
) -> None:
    """``workers`` spawned processes serving the port (:mod:`seqlab.serving.supervisor`), each building its app from
    :func:`seqlab.serving.app.app_from_env`; on SIGTERM / SIGINT each worker shuts down gracefully and this returns. A
    worker that fails to start (its model loading, after the parent's own check passed) stops them all, and this
    raises: exit status 2, not 0."""
    try:
        import fastapi  # noqa: F401 - fail here, in one line, rather than in every worker
    except ImportError:  # pragma: no cover - optional dependency
        raise SeqlabError("serving needs FastAPI: pip install 'seqlab[serve]'") from None
    # a bad model folder or engine: one error line here, before any worker (auto cannot fail: no export here);
    # the model is checked on the CPU, so that this supervising process holds no GPU memory
    if engine == "onnxruntime":
        refuse_off_cpu(device)
    bound_socket(host, port, REUSE_PORT).close()  # a port in use or a bad host: one line before the model loads
    Tagger.load(model, "cpu", "torch" if engine == "auto" or device.type != "cpu" else engine)
    os.environ.update(
        {
            ENV_MODEL: os.path.abspath(model),
            ENV_MAX_BATCH: str(max_batch),
            ENV_ENGINE: engine,
            ENV_DEVICE: str(device),
            ENV_MAX_WAIT_MS: repr(max_wait_ms),
            ENV_LIMITS: limits.to_env(),
            ENV_THREADS: str(max(1, threads // workers)),
        }
    )
    supervise(workers, host, port, access_log, watchdog)
