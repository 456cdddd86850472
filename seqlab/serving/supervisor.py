"""The parent process of ``seqlab serve --workers N``: N spawned worker processes serving one port.

Each worker is a uvicorn server whose app comes from :func:`seqlab.serving.app.app_from_env` (its model, engine and
micro-batcher from the ``SEQLAB_SERVE_*`` variables the parent set before spawning), wrapped so that it sends
the parent heartbeats.

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
SIGTERM (uvicorn's graceful shutdown: requests in flight finish) and waits for them.

A worker that hangs without dying is found by its heartbeat (:mod:`seqlab.serving.heartbeat`): once started, each
worker's event loop counts in shared memory, and a worker whose count has not moved for ``timeout_s``
(``--worker-timeout``; 0 turns this off) is killed with SIGKILL and replaced, with one warning line. Until its
first beat a worker is loading its model: it is judged by ``--worker-start-timeout`` instead (default 300 s;
0 turns this off), so that one stuck while starting (a hung network file system, a lock) is replaced too. A
worker that hangs during a graceful shutdown is killed the same way, so that the parent does not wait for
it forever.

Replacements are spaced out (:mod:`seqlab.serving.backoff`): a worker that ends soon after it started is replaced
after 0.5 s, then 1, 2, 4 ... s (at most 30) if its replacements keep ending as soon; one that ran 30 s is
replaced at once. The wait is logged, and a stop signal ends it at once.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from functools import partial

from seqlab.errors import SeqlabError
from seqlab.serving.backoff import Backoff
from seqlab.serving.heartbeat import Counter, Heartbeat, Pulse, interval_for

log = logging.getLogger("uvicorn.error")

#: A listening socket per worker, spread by the kernel (Linux); else one socket shared by all.
REUSE_PORT = sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")

#: ``--worker-timeout``: seconds without a heartbeat before a worker is killed (0: never), and its range.
WORKER_TIMEOUT_S = 60
WORKER_TIMEOUT_RANGE = (0, 3600)
#: ``--worker-start-timeout``: seconds a worker may take to its first heartbeat (0: any), and its range.
WORKER_START_TIMEOUT_S = 300
WORKER_START_TIMEOUT_RANGE = (0, 86400)


@dataclass(frozen=True)
class Watchdog:
    """When the parent judges a worker hung: ``timeout_s`` without a heartbeat once it beats, ``start_timeout_s``
    from its start to its first beat; 0 turns either off."""

    timeout_s: float = WORKER_TIMEOUT_S
    start_timeout_s: float = WORKER_START_TIMEOUT_S


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


def _worker_app(counter: Counter, interval_s: float) -> Heartbeat:
    """The app of one worker: :func:`seqlab.serving.app.app_from_env`'s, with a heartbeat on the event loop."""
    from seqlab.serving.app import app_from_env

    return Heartbeat(app_from_env(), counter, interval_s)


def _worker(
    host: str, port: int, access_log: bool, shared: socket.socket | None, counter: Counter, interval_s: float
) -> None:
    """One worker (a spawned process): a uvicorn server on its own SO_REUSEPORT socket, or on ``shared``,
    counting its heartbeats in ``counter``."""
    import uvicorn

    if shared is None:
        sock = bound_socket(host, port, reuse_port=True)
        sock.listen(2048)  # uvicorn's default backlog
    else:
        sock = shared
    config = uvicorn.Config(
        partial(_worker_app, counter, interval_s),
        factory=True,
        host=host,
        port=port,
        log_level="info",
        access_log=access_log,
    )
    uvicorn.Server(config).run(sockets=[sock])


@dataclass
class _Slot:
    """One of the N workers' places: its process (None while a replacement waits out its back-off)."""

    process: multiprocessing.Process | None = None
    pulse: Pulse | None = None
    started_at: float = 0.0
    restart_at: float = 0.0
    backoff: Backoff = field(default_factory=Backoff)

    def hang(self, watchdog: Watchdog, now: float) -> str | None:
        """Why this slot's running worker is judged hung (for the log line), or None."""
        if self.process is None or self.process.exitcode is not None or self.pulse is None:
            return None
        silent = self.pulse.silent_s(now)
        if self.pulse.beating:
            if watchdog.timeout_s > 0 and silent > watchdog.timeout_s:
                return f"sent no heartbeat for {watchdog.timeout_s:g} s (--worker-timeout)"
        elif watchdog.start_timeout_s > 0 and now - self.started_at > watchdog.start_timeout_s:
            return f"did not finish starting in {watchdog.start_timeout_s:g} s (--worker-start-timeout)"
        return None


def supervise(
    workers: int, host: str, port: int, access_log: bool = True, watchdog: Watchdog = Watchdog(), poll_s: float = 0.2
) -> None:
    """Run ``workers`` worker processes on (host, port) until SIGTERM or SIGINT, then stop them gracefully.
    A worker the ``watchdog`` judges hung is killed and replaced. Raises SeqlabError if the port cannot be
    had or a worker fails to start."""
    from uvicorn.config import STARTUP_FAILURE  # what app_from_env exits with when it cannot build the app

    reserve = bound_socket(host, port, REUSE_PORT)
    shared = None
    if not REUSE_PORT:
        reserve.listen(2048)
        shared = reserve
    spawn = multiprocessing.get_context("spawn")  # fresh interpreters: no copy of the parent's threads or model
    interval_s = interval_for(watchdog.timeout_s)

    def start(slot: _Slot) -> None:
        counter = spawn.RawValue("Q", 0)  # a fresh count for each process: see seqlab.serving.heartbeat
        slot.process = spawn.Process(
            target=_worker, args=(host, port, access_log, shared, counter, interval_s), name="seqlab-serve-worker"
        )
        slot.process.start()
        slot.pulse, slot.started_at = Pulse(counter), time.monotonic()

    def replace(slot: _Slot, why: str) -> None:
        now = time.monotonic()
        delay = slot.backoff.delay(now - slot.started_at)
        log.warning("%s; starting another%s", why, f" in {delay:g} s" if delay else "")
        slot.process, slot.pulse, slot.restart_at = None, None, now + delay

    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    log.info("Started parent process [%d]", os.getpid())
    slots = [_Slot() for _ in range(workers)]
    failed = False
    try:
        for slot in slots:
            start(slot)
        while not stop.wait(poll_s):
            for slot in slots:
                if stop.is_set():  # a worker ending with a Ctrl-C is not replaced
                    break
                if slot.process is None:
                    if time.monotonic() >= slot.restart_at:
                        start(slot)
                elif why := slot.hang(watchdog, time.monotonic()):
                    slot.process.kill()
                    slot.process.join()
                    replace(slot, f"Worker process [{slot.process.pid}] {why}; killed it")
                elif slot.process.exitcode == STARTUP_FAILURE:
                    failed = True
                    stop.set()
                elif slot.process.exitcode is not None:
                    process = slot.process
                    replace(slot, f"Worker process [{process.pid}] ended with status {process.exitcode}")
    finally:
        _stop_workers(slots, watchdog, poll_s)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        reserve.close()
        log.info("Stopping parent process [%d]", os.getpid())
    if failed:
        raise SeqlabError("serve --workers: a worker process failed to start (its error is logged above)")


def _stop_workers(slots: list[_Slot], watchdog: Watchdog, poll_s: float) -> None:
    """SIGTERM to every running worker (uvicorn finishes the requests in flight, then exits), and wait for
    them; one that stops sending heartbeats meanwhile is hung and gets SIGKILL."""
    running = [slot for slot in slots if slot.process is not None]
    for slot in running:
        if slot.process.exitcode is None:
            slot.process.terminate()
    while running:
        for slot in running:
            why = slot.hang(watchdog, time.monotonic())
            if why:
                log.warning("Worker process [%d] %s while stopping; killing it", slot.process.pid, why)
                slot.process.kill()
                slot.process.join()
        running = [slot for slot in running if slot.process.exitcode is None]
        if running:
            time.sleep(poll_s)
    for slot in slots:
        if slot.process is not None:
            slot.process.join()
