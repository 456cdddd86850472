"""The parent process of ``seqlab serve --workers N``: N spawned worker processes serving one port.

Each worker is a uvicorn server whose app comes from :func:`seqlab.serve.app_from_env` (its model, engine and
micro-batcher from the ``SEQLAB_SERVE_*`` variables the parent set before spawning).

How the port is shared decides how the load is shared. With one listening socket inherited by every worker
(uvicorn's own supervisor does this) the worker that is idle when connections arrive accepts them all, and a
keep-alive connection stays with the worker that accepted it: under 16 persistent connections opened at once,
one worker of two served all of them in two runs of three (BENCHMARKS.md, ninth session) and the service ran
on one core. On Linux each worker therefore listens on a socket of its own with ``SO_REUSEPORT``, and the
kernel spreads new connections over the workers' sockets by a hash of their addresses. The parent binds the
port too, first (so that a port in use is one error line before any worker starts) but never listens: a
socket that listens without accepting would hold the connections hashed to it. Elsewhere (``SO_REUSEPORT``
does not spread TCP connections on macOS or the BSDs) the parent listens on one socket that every worker
inherits, as uvicorn does.

The parent restarts a worker that dies after starting, stops everything if a worker fails to start (its
model cannot be loaded: uvicorn's start-up failure status) and, on SIGTERM or SIGINT, sends each worker
SIGTERM (uvicorn's graceful shutdown: requests in flight finish) and waits for them. A worker that hangs
without dying is not detected.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import socket
import sys
import threading

from seqlab.errors import SeqlabError

log = logging.getLogger("uvicorn.error")

#: A listening socket per worker, spread by the kernel (Linux); else one socket shared by all.
REUSE_PORT = sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")


def bound_socket(host: str, port: int, reuse_port: bool) -> socket.socket:
    """A TCP socket bound to (host, port), not yet listening; a port that cannot be had is a SeqlabError."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        raise SeqlabError(f"serve: cannot listen on {host}:{port}: {err.strerror or err}") from None
    return sock


def _worker(host: str, port: int, access_log: bool, shared: socket.socket | None) -> None:
    """One worker (a spawned process): a uvicorn server on its own SO_REUSEPORT socket, or on ``shared``."""
    import uvicorn
    if shared is None:
        sock = bound_socket(host, port, reuse_port=True)
        sock.listen(2048)  # uvicorn's default backlog
    else:
        sock = shared
    config = uvicorn.Config("seqlab.serve:app_from_env", factory=True, host=host, port=port, log_level="info",
                            access_log=access_log)
    uvicorn.Server(config).run(sockets=[sock])


def supervise(workers: int, host: str, port: int, access_log: bool = True, poll_s: float = 0.2) -> None:
    """Run ``workers`` worker processes on (host, port) until SIGTERM or SIGINT, then stop them gracefully.
    Raises SeqlabError if the port cannot be had or a worker fails to start."""
    from uvicorn.config import STARTUP_FAILURE  # what app_from_env exits with when it cannot build the app
    reserve = bound_socket(host, port, REUSE_PORT)
    shared = None
    if not REUSE_PORT:
        reserve.listen(2048)
        shared = reserve
    spawn = multiprocessing.get_context("spawn")  # fresh interpreters: no copy of the parent's threads or model

    def start() -> multiprocessing.Process:
        process = spawn.Process(target=_worker, args=(host, port, access_log, shared), name="seqlab-serve-worker")
        process.start()
        return process

    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    log.info("Started parent process [%d]", os.getpid())
    processes: list[multiprocessing.Process] = []
    failed = False
    try:
        processes = [start() for _ in range(workers)]
        while not stop.wait(poll_s):
            for k, process in enumerate(processes):
                if process.exitcode is None or stop.is_set():  # a worker ending with a Ctrl-C is not replaced
                    continue
                if process.exitcode == STARTUP_FAILURE:
                    failed = True
                    stop.set()
                    break
                log.warning("Worker process [%d] ended with status %s; starting another", process.pid,
                            process.exitcode)
                processes[k] = start()
    finally:
        for process in processes:
            if process.exitcode is None:
                process.terminate()  # SIGTERM: uvicorn finishes the requests in flight, then exits
        for process in processes:
            process.join()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        reserve.close()
        log.info("Stopping parent process [%d]", os.getpid())
    if failed:
        raise SeqlabError("serve --workers: a worker process failed to start (its error is logged above)")
