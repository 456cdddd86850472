"""HTTP API over a saved model."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from seqlab import Tagger, train
from tests.conftest import tiny_config
from tests.forkserver import python_command, seqlab_command

fastapi = pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from seqlab.serving.app import create_app  # noqa: E402


def test_predict_endpoint(tiny_corpus, tmp_path):
    raw = tiny_config(tiny_corpus).model_dump(mode="json")
    raw["train"]["max_epochs"] = 2
    from seqlab.config import config_from_dict

    train(config_from_dict(raw), tmp_path / "run", progress=False)
    tagger = Tagger.load(tmp_path / "run" / "model")
    client = TestClient(create_app(tagger))
    assert client.get("/health").json() == {"status": "ok"}
    assert client.get("/info").json()["decoder"] == "crf"
    body = client.post("/predict", json={"sentences": ["He reckons the deficit will narrow .", ["Yes", "."]]}).json()
    preds = body["predictions"]
    assert len(preds) == 2 and preds[0]["tokens"][0] == "He" and len(preds[1]["tags"]) == 2
    assert preds[0]["tags"] == tagger.predict(["He reckons the deficit will narrow ."])[0].tags
    assert client.post("/predict", json={"sentences": "not a list"}).status_code == 422


@pytest.fixture(scope="module")
def client(shared_tiny_model):
    from seqlab.serving.app import Limits

    return TestClient(
        create_app(Tagger.load(shared_tiny_model[1]), Limits(max_sentences=5, max_chars=300, max_body_bytes=4000))
    )


BIG = "word " * 2000


@pytest.mark.parametrize(
    "body,status",
    [
        (b'{"sentences": ["a b"', 422),  # not JSON
        (b"[]", 422),
        (b'{"sentences": []}', 422),
        (b'{"sentences": [3]}', 422),
        (b'{"sentences": [["ok", ""]]}', 422),  # an empty token
        (b'{"sentences": ["a"], "nbest": NaN}', 422),
        (b'{"sentences": ["a"], "nbest": 1e400}', 422),
        (b'{"sentences": ["a"], "nbest": 0}', 422),
        (b'{"sentences": ["a \\ud800 b"]}', 422),  # a lone surrogate
        (b'{"sentences": ["a \\u0000 b"]}', 422),
        (b'{"sentences": ["a"], "model": "/etc/passwd"}', 422),  # nothing reaches a path
        (b'{"sentences": ["a", "b", "c", "d", "e", "f"]}', 413),  # one over the sentence cap
        (('{"sentences": ["' + "x" * 301 + '"]}').encode(), 413),  # over the character cap
        (('{"sentences": ["' + BIG + '"]}').encode(), 413),  # over the body cap
    ],
)
def test_bad_requests_get_4xx_json_without_echo(client, body, status):
    r = client.post("/predict", content=body, headers={"content-type": "application/json"})
    assert r.status_code == status, r.text
    assert len(r.content) < 2000  # the input is never echoed back
    assert r.json()


def test_chunked_body_over_the_limit(client):
    def chunks():
        for _ in range(100):
            yield b" " * 100

    r = client.post("/predict", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413


def test_confidence_and_limits_in_the_api(client):
    r = client.post("/predict", json={"sentences": ["He reckons the deficit will narrow ."]})
    pred = r.json()["predictions"][0]
    assert pred["confidence_kind"] == "crf-marginal" and len(pred["token_confidence"]) == 7
    assert all(0 < s["confidence"] <= 1 for s in pred["spans"])
    assert client.get("/info").json()["limits"]["max_sentences"] == 5
    stack = client.get("/info").json()["server"]  # what uvicorn's 'auto' picks, by what is installed
    assert stack["http"] == ("httptools" if importlib.util.find_spec("httptools") else "h11")
    assert stack["loop"] == ("uvloop" if importlib.util.find_spec("uvloop") else "asyncio")
    assert client.get("/openapi.json").json()["paths"]["/predict"]


def test_concurrent_requests_share_network_calls(shared_tiny_model):
    import threading

    tagger = Tagger.load(shared_tiny_model[1])
    texts = [f"Stocks of company {i} rose {i} % on Monday ." for i in range(12)]
    expected = [p.tags for p in tagger.predict(texts)]
    app = create_app(tagger, max_batch=64, max_wait_ms=300)
    results: dict[int, list] = {}
    with TestClient(app) as client:
        barrier = threading.Barrier(len(texts))

        def ask(i):
            barrier.wait()
            results[i] = client.post("/predict", json={"sentences": [texts[i]], "confidence": False}).json()

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(texts))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        calls = client.get("/info").json()["batching"]["network_calls"]
    assert [results[i]["predictions"][0]["tags"] for i in range(len(texts))] == expected
    assert calls < len(texts)  # merged: fewer network calls than requests


def test_an_error_reaches_only_the_request_that_caused_it():
    import asyncio

    from seqlab.errors import SeqlabError
    from seqlab.serving.batcher import MicroBatcher

    def run(sentences, options):
        if "bad" in sentences:
            raise SeqlabError("bad input")
        return [s.upper() for s in sentences]

    async def main():
        batcher = MicroBatcher(run, max_batch=10, max_wait=0.2)
        return await asyncio.gather(
            batcher.submit(["a", "b"], 0),
            batcher.submit(["bad"], 0),
            batcher.submit(["c"], 0),
            batcher.submit(["d"], 1),
            return_exceptions=True,
        )

    ok1, err, ok2, other = asyncio.run(main())
    assert ok1 == ["A", "B"] and ok2 == ["C"] and other == ["D"]
    assert isinstance(err, SeqlabError)


def _serve(model, *options: str, stderr, stdout=None, forked: bool = False):
    """``seqlab serve MODEL OPTIONS`` as a real process on a free loopback port: (process, base URL). A fresh
    interpreter, or where ``forked``, a process forked from the tests' seqlab server (tests/forkserver.py: no
    imports to wait for; signals sent to the process reach the service): for a service of one process (the
    worker tests look for the workers among the process's descendants)."""
    import subprocess

    port = _free_port()
    server = subprocess.Popen(
        [*seqlab_command(_env(), fresh=not forked), "-q", "serve", str(model), "--port", str(port), *options],
        env=_env(),
        stdout=stdout or subprocess.DEVNULL,
        stderr=stderr,
    )
    return server, f"http://127.0.0.1:{port}"


def _wait_ready(base: str) -> None:
    """Until the server at ``base`` answers /health (at most about 30 s)."""
    import time
    import urllib.request

    for _ in range(300):
        try:
            urllib.request.urlopen(base + "/health", timeout=1).read()
            return
        except OSError:
            time.sleep(0.1)


def test_sigterm_finishes_requests_in_flight_and_exits_0(shared_tiny_model):
    import json
    import os
    import signal
    import subprocess
    import sys
    import threading
    import time
    import urllib.request

    server, base = _serve(shared_tiny_model[1], stderr=subprocess.PIPE, forked=True)
    try:
        _wait_ready(base)
        # the default --threads leaves one of the process's PyTorch threads to the event loop
        default = subprocess.run(
            [sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
            capture_output=True,
            text=True,
            env=dict(os.environ),
            check=True,
        ).stdout
        info = json.loads(urllib.request.urlopen(base + "/info", timeout=10).read())
        assert info["batching"]["threads"] == max(1, int(default) - 1)
        assert info["engine"] == "auto"  # the default: onnxruntime for small batches where it is faster
        body = json.dumps(
            {"sentences": ["The dollar fell sharply against the yen on Monday ."] * 1000, "nbest": 5, "explain": True}
        ).encode()
        reply = {}

        def ask():
            req = urllib.request.Request(base + "/predict", body, {"content-type": "application/json"})
            with urllib.request.urlopen(req, timeout=120) as r:
                reply["status"], reply["n"] = r.status, len(json.loads(r.read())["predictions"])

        client = threading.Thread(target=ask)
        client.start()
        time.sleep(0.5)  # the request is being tagged
        server.send_signal(signal.SIGTERM)
        client.join(timeout=120)
        code = server.wait(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
    assert reply == {"status": 200, "n": 1000}
    assert code == 0, server.stderr.read().decode()[-500:]


def test_access_log_is_on_by_default_and_off_with_its_flag(shared_tiny_model):
    """The access log, and (the first server) a limit from the command line."""
    import subprocess
    import urllib.error
    import urllib.request

    logs = {}
    for options in (("--max-sentences", "1"), ("--no-access-log",)):
        server, base = _serve(
            shared_tiny_model[1], *options, stderr=subprocess.PIPE, stdout=subprocess.PIPE, forked=True
        )
        try:
            _wait_ready(base)
            req = urllib.request.Request(
                base + "/predict", b'{"sentences": ["Stocks rose ."]}', {"content-type": "application/json"}
            )
            assert urllib.request.urlopen(req, timeout=60).status == 200
            req = urllib.request.Request(
                base + "/predict",
                b'{"sentences": ["Stocks rose .", "Bonds fell ."]}',
                {"content-type": "application/json"},
            )
            expected = 413 if "--max-sentences" in options else 200
            try:
                assert urllib.request.urlopen(req, timeout=60).status == expected
            except urllib.error.HTTPError as err:
                assert err.code == expected
        finally:
            server.terminate()
            out, err = server.communicate(timeout=60)
        assert server.returncode == 0 and "Application startup complete" in err.decode()
        logs[options] = out.decode() + err.decode()
    logged = logs[("--max-sentences", "1")]
    assert '"POST /predict HTTP/1.1" 200' in logged  # uvicorn's access log (stdout)
    assert '"POST /predict HTTP/1.1" 413' in logged  # --max-sentences 1: two sentences are too many
    assert "/predict" not in logs[("--no-access-log",)] and "/health" not in logs[("--no-access-log",)]


def _descendants(pid: int) -> dict[int, str]:
    """{pid: command line} of every process below ``pid`` (from /proc)."""
    from pathlib import Path

    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, ...
            parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue  # ended while we looked
    found, todo = {}, [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            try:
                found[child] = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            todo.append(child)
    return found


def _running(pid: int) -> bool:
    from pathlib import Path

    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie has ended; its parent (or init) only has to reap it


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="reads /proc for the worker processes")
def test_workers_share_the_port_and_sigterm_stops_them_all(shared_tiny_model, tmp_path):
    import json
    import signal
    import time
    import urllib.request
    from concurrent.futures import ThreadPoolExecutor

    log = tmp_path / "serve.log"
    with log.open("wb") as err:
        server, base = _serve(shared_tiny_model[1], "--workers", "2", stderr=err)
    try:
        # both workers serve
        _wait_while(server, log, lambda: log.read_text().count("Application startup complete") < 2)
        assert urllib.request.urlopen(base + "/health", timeout=10).read() == b'{"status":"ok"}'
        workers = [p for p, cmd in _descendants(server.pid).items() if "spawn_main" in cmd]
        assert len(workers) == 2
        texts = [[f"Shares of company {i} rose {k} % on Monday ." for k in range(3)] for i in range(16)]

        def ask(sentences):
            body = json.dumps({"sentences": sentences, "confidence": False}).encode()
            req = urllib.request.Request(base + "/predict", body, {"content-type": "application/json"})
            with urllib.request.urlopen(req, timeout=60) as r:
                return json.loads(r.read())["predictions"]

        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(ask, texts))
        tagger = Tagger.load(shared_tiny_model[1])
        assert answers == [json.loads(json.dumps([p.to_dict() for p in tagger.predict(t)])) for t in texts]
        below = _descendants(server.pid)  # the workers and multiprocessing's resource tracker
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
    assert code == 0, log.read_text()[-2000:]
    deadline = time.monotonic() + 10
    while [p for p in below if _running(p)] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in below if _running(p)], below  # no orphans left behind
    assert "Traceback" not in log.read_text()


def test_app_from_env_builds_a_worker_app_or_stops_the_supervisor(shared_tiny_model, monkeypatch, tmp_path):
    from seqlab.serving.app import Limits, app_from_env

    monkeypatch.setenv("SEQLAB_SERVE_MODEL", str(shared_tiny_model[1]))
    monkeypatch.setenv("SEQLAB_SERVE_MAX_BATCH", "7")
    monkeypatch.setenv("SEQLAB_SERVE_MAX_WAIT_MS", "2.5")
    monkeypatch.setenv("SEQLAB_SERVE_THREADS", "1")
    monkeypatch.setenv("SEQLAB_SERVE_LIMITS", Limits(max_sentences=2, max_chars=300, max_body_bytes=5000).to_env())
    client = TestClient(app_from_env())
    info = client.get("/info").json()
    assert info["batching"]["max_batch"] == 7 and info["batching"]["max_wait_ms"] == 2.5
    assert info["limits"] == {"max_sentences": 2, "max_chars": 300, "max_body_bytes": 5000}
    assert client.post("/predict", json={"sentences": ["a b", "c", "d"]}).status_code == 413
    assert client.post("/predict", json={"sentences": ["a b", "c"]}).status_code == 200
    for bad in ('{"max_sentences": 2}', "[1, 2, 3]", '{"max_sentences": 0, "max_chars": 1, "max_body_bytes": 1}'):
        monkeypatch.setenv("SEQLAB_SERVE_LIMITS", bad)
        with pytest.raises(SystemExit) as stop:
            app_from_env()
        assert stop.value.code == 3
    monkeypatch.setenv("SEQLAB_SERVE_LIMITS", "")
    monkeypatch.setenv("SEQLAB_SERVE_MODEL", str(tmp_path / "nomodel"))
    with pytest.raises(SystemExit) as stop:  # uvicorn's start-up failure status: no restart loop
        app_from_env()
    assert stop.value.code == 3


def test_a_worker_that_fails_to_start_makes_serve_exit_2(tmp_path):
    """The parent's model check passes (here: stubbed) but every worker fails to load its model: the
    supervisor stops, and ``seqlab serve --workers 2`` exits with status 2 and says so, instead of 0."""
    import subprocess

    port = _free_port()
    script = (
        "import sys, seqlab.serving.serve as s, seqlab.cli as cli\n"
        "s.Tagger.load = lambda *a, **k: None  # the parent's check only; workers are fresh processes\n"
        f"sys.exit(cli.main(['-q', 'serve', {str(tmp_path / 'nomodel')!r}, '--port', '{port}', "
        "'--workers', '2']))\n"
    )
    done = subprocess.run(
        [*python_command(_env()), "-c", script], env=_env(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2, done.stderr[-800:]
    assert "a worker process failed to start" in done.stderr


def _wait_while(server, log: Path, pending, seconds: float = 90, poll: float = 0.2) -> None:
    """Wait while ``pending()`` holds, asserting that the service is still up and the wait under ``seconds``
    (the log's tail is the failure message)."""
    import time

    deadline = time.monotonic() + seconds
    while pending():
        assert server.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
        time.sleep(poll)


def _end(server, *stopped: int | None) -> None:
    """Cleanup after a test: kill the service if it still runs, and each stopped worker left over."""
    import os
    import signal

    if server.poll() is None:
        server.kill()
    for pid in stopped:
        if pid is not None and _running(pid):
            os.kill(pid, signal.SIGKILL)


def _start_workers(model, log: Path, *options: str):
    """``seqlab serve MODEL --workers 2 OPTIONS`` once both workers serve: (process, base URL)."""
    with log.open("wb") as err:
        server, base = _serve(model, "--workers", "2", *options, stderr=err)
    _wait_while(server, log, lambda: log.read_text().count("Application startup complete") < 2)
    return server, base


def _pids_of_persistent_connections(base: str, n: int) -> list[int]:
    """Open ``n`` keep-alive connections at once, as a client pool does, and ask each which worker holds it."""
    import http.client
    import json
    from urllib.parse import urlsplit

    url = urlsplit(base)
    conns = [http.client.HTTPConnection(url.hostname, url.port, timeout=30) for _ in range(n)]
    for conn in conns:
        conn.connect()
    pids = []
    for conn in conns:
        for _ in range(2):  # twice on the same connection: it stays with its worker
            conn.request("GET", "/info")
            pids.append(json.loads(conn.getresponse().read())["server"]["pid"])
        assert pids[-1] == pids[-2]
        conn.close()
    return pids[::2]


@pytest.mark.skipif(
    not __import__("sys").platform.startswith("linux"), reason="SO_REUSEPORT spreads connections on Linux"
)
def test_workers_share_persistent_connections_and_a_dead_worker_is_replaced(shared_tiny_model, tmp_path):
    """Keep-alive connections opened at once are spread over both workers (each listens on its own
    SO_REUSEPORT socket: with one shared socket, one worker could take them all), and a worker killed
    outright is replaced while the other keeps serving."""
    import json
    import os
    import signal
    import time
    import urllib.request

    server, base = _start_workers(
        shared_tiny_model[1], tmp_path / "serve.log", "--no-access-log", "--max-chars", "12345"
    )
    try:
        limits = json.loads(urllib.request.urlopen(base + "/info", timeout=10).read())["limits"]
        assert limits["max_chars"] == 12345  # the command line's limits reach the workers
        pids = _pids_of_persistent_connections(base, 24)
        assert len(set(pids)) == 2, pids  # all 24 on one worker: a chance of 2 in 2^24 if spread at random
        victim = pids[0]
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 90
        while _running(victim) or (tmp_path / "serve.log").read_text().count("Application startup complete") < 3:
            assert server.poll() is None and time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            time.sleep(0.2)  # gone, its socket with it, and a replacement serving
        assert len(set(_pids_of_persistent_connections(base, 24)) - {victim}) == 2  # two workers again
        assert urllib.request.urlopen(base + "/health", timeout=10).read() == b'{"status":"ok"}'
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0
    finally:
        if server.poll() is None:
            server.kill()
    assert "ended with status -9; starting another" in (tmp_path / "serve.log").read_text()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_port_in_use_is_one_line_before_any_worker(shared_tiny_model, workers):
    """With or without --workers: seqlab's one line and exit 2 (not uvicorn's message and exit 3), before the
    model is loaded."""
    import socket
    import subprocess

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        script = (
            "import sys, seqlab.serving.serve as s, seqlab.cli as cli\n"
            "def load(*a, **k): raise AssertionError('the model was loaded before the port was checked')\n"
            "s.Tagger.load = load\n"
            f"sys.exit(cli.main(['-q', 'serve', {str(shared_tiny_model[1])!r}, '--port', '{port}', "
            f"'--workers', '{workers}']))\n"
        )
        done = subprocess.run(
            [*python_command(_env()), "-c", script], capture_output=True, text=True, timeout=300, env=_env()
        )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip() == f"error: serve: cannot listen on 127.0.0.1:{port}: Address already in use"


def test_a_body_far_over_the_limit_gets_413_not_a_reset(shared_tiny_model):
    """A declared body over --max-body-bytes is answered 413 before it is read, at any size, and the rest is
    drained: a client that sends the whole body before reading (with Connection: close, or http.client) reads
    the JSON error instead of a connection reset. The server serves on afterwards."""
    import http.client
    import subprocess

    import httpx

    server, base = _serve(
        shared_tiny_model[1], "--max-body-bytes", "4000", "--no-access-log", stderr=subprocess.DEVNULL, forked=True
    )
    try:
        _wait_ready(base)
        port = int(base.rsplit(":", 1)[1])
        for size in (5_000, 4_000_000, 10_000_000):
            body = b'{"sentences": ["' + b"x" * size + b'"]}'
            for close in (False, True):
                r = httpx.post(
                    base + "/predict",
                    content=body,
                    timeout=30,
                    headers={"content-type": "application/json", **({"connection": "close"} if close else {})},
                )
                assert r.status_code == 413 and r.json() == {"error": "request body over 4000 bytes"}, (size, close)
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)  # urllib's: sends all, then reads
            conn.request(
                "POST", "/predict", body=body, headers={"content-type": "application/json", "connection": "close"}
            )
            answer = conn.getresponse()
            assert answer.status == 413 and b"request body over 4000 bytes" in answer.read(), size
            conn.close()
        r = httpx.post(base + "/predict", json={"sentences": ["Stocks rose ."]}, timeout=30)
        assert r.status_code == 200
    finally:
        server.terminate()
        server.wait(30)


def test_a_client_waiting_for_100_continue_gets_413_without_sending_its_body(shared_tiny_model):
    import socket
    import subprocess

    server, base = _serve(
        shared_tiny_model[1], "--max-body-bytes", "4000", "--no-access-log", stderr=subprocess.DEVNULL, forked=True
    )
    try:
        _wait_ready(base)
        port = int(base.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(
                b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 1000000000\r\nExpect: 100-continue\r\n\r\n"
            )
            head = sock.recv(4096)
        assert head.startswith(b"HTTP/1.1 413 ") and b"100 Continue" not in head, head[:200]
    finally:
        server.terminate()
        server.wait(30)


def test_one_shared_socket_where_the_kernel_does_not_spread_connections(shared_tiny_model, tmp_path):
    """The path for macOS and the BSDs, run here by turning SO_REUSEPORT off: the parent listens and both
    workers serve the socket they inherit."""
    import subprocess
    import urllib.request

    port = _free_port()
    script = (
        "import sys, seqlab.serving.supervisor as s, seqlab.cli as cli\n"
        "s.REUSE_PORT = False\n"
        f"sys.exit(cli.main(['-q', 'serve', {str(shared_tiny_model[1])!r}, '--port', '{port}', "
        "'--workers', '2']))\n"
    )
    log = tmp_path / "serve.log"
    with log.open("wb") as err:
        server = subprocess.Popen([*python_command(_env()), "-c", script], env=_env(), stderr=err)
    try:
        _wait_while(server, log, lambda: log.read_text().count("Application startup complete") < 2)
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10).read() == b'{"status":"ok"}'
        server.terminate()
        assert server.wait(timeout=60) == 0
    finally:
        if server.poll() is None:
            server.kill()


def test_back_off_doubles_for_quick_ends_up_to_its_cap_and_resets_after_a_stable_run():
    from seqlab.serving.backoff import Backoff

    policy = Backoff(first_s=0.5, cap_s=30, stable_s=30)
    assert [policy.delay(1.0) for _ in range(9)] == [0.5, 1, 2, 4, 8, 16, 30, 30, 30]
    assert policy.delay(30.0) == 0  # a worker that ran stable_s: replaced at once, and the count starts again
    assert policy.delay(29.9) == 0.5
    assert [Backoff().delay(0.0) for _ in range(3)] == [0.5, 0.5, 0.5]  # each slot has a policy of its own
    many = Backoff()
    assert [many.delay(0.0) for _ in range(2000)][-1] == 30  # no overflow however long the loop


def test_heartbeats_come_from_the_event_loop_once_the_app_has_started():
    """The wrapper's beats start with the app's start-up, stop while the loop is blocked, and end with the
    app's shutdown; other requests pass through unchanged."""
    import asyncio
    import time
    from types import SimpleNamespace

    from seqlab.serving.heartbeat import Heartbeat, Pulse, interval_for

    seen = []

    async def app(scope, receive, send):  # a minimal ASGI app: the lifespan protocol, and one HTTP scope
        if scope["type"] == "http":
            seen.append("http")
            return
        assert (await receive())["type"] == "lifespan.startup"
        await send({"type": "lifespan.startup.complete"})
        assert (await receive())["type"] == "lifespan.shutdown"
        await send({"type": "lifespan.shutdown.complete"})

    async def main():
        counter = SimpleNamespace(value=0)
        wrapped = Heartbeat(app, counter, interval_s=0.01)
        await wrapped({"type": "http"}, None, None)
        inbox: asyncio.Queue = asyncio.Queue()
        sent = []

        async def send(message):
            sent.append(message["type"])

        lifespan = asyncio.get_running_loop().create_task(wrapped({"type": "lifespan"}, inbox.get, send))
        await asyncio.sleep(0.05)
        counts = [counter.value]  # no start-up yet: no beat
        await inbox.put({"type": "lifespan.startup"})
        await asyncio.sleep(0.1)
        counts.append(counter.value)
        time.sleep(0.1)
        counts.append(counter.value)
        await inbox.put({"type": "lifespan.shutdown"})
        await lifespan
        counts.append(counter.value)
        await asyncio.sleep(0.05)
        counts.append(counter.value)  # shut down: no beat
        return counts, sent

    counts, sent = asyncio.run(main())
    assert seen == ["http"] and sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert counts[0] == 0 and counts[1] >= 2 and counts[2] == counts[1] and counts[4] == counts[3]
    assert interval_for(2) == 0.5 and interval_for(60) == 1.0 and interval_for(0) == 1.0

    counter = SimpleNamespace(value=0)
    pulse = Pulse(counter)
    assert pulse.silent_s(now=100.0) == 0  # no beat yet: a worker loading its model is not judged
    counter.value = 1
    assert pulse.silent_s(now=101.0) == 0 and pulse.silent_s(now=104.5) == 3.5
    counter.value = 2
    assert pulse.silent_s(now=105.0) == 0


@pytest.mark.parametrize(
    "flag,value,needle",
    [
        ("--worker-timeout", "-1", "0..3600"),
        ("--worker-timeout", "ten", "0..3600"),
        ("--worker-timeout", "3601", "0..3600"),
        ("--worker-timeout", "1.5", "0..3600"),
        ("--worker-start-timeout", "-5", "0..86400"),
        ("--worker-start-timeout", "86401", "0..86400"),
        ("--worker-start-timeout", "soon", "0..86400"),
    ],
)
def test_a_bad_worker_timeout_is_one_line_and_exit_2(flag, value, needle, capsys):
    from seqlab.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["-q", "serve", "m", "--workers", "2", flag, value])
    assert stop.value.code == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and flag in lines[0], lines
    assert needle in lines[0] and value in lines[0]


def test_the_watchdog_judges_a_starting_worker_by_its_start_timeout_then_by_heartbeats():
    """Before its first beat a worker is judged by start_timeout_s from its start (0: never); after it, by
    timeout_s of silence; a worker that has ended is not judged at all."""
    from types import SimpleNamespace

    from seqlab.serving.heartbeat import Pulse
    from seqlab.serving.supervisor import Watchdog, _Slot

    counter = SimpleNamespace(value=0)
    slot = _Slot(process=SimpleNamespace(exitcode=None), pulse=Pulse(counter), started_at=100.0)
    watchdog = Watchdog(timeout_s=2, start_timeout_s=5)
    assert slot.hang(watchdog, 104.9) is None  # loading its model
    assert slot.hang(Watchdog(timeout_s=2, start_timeout_s=0), 1e6) is None  # never judged while starting
    assert slot.hang(watchdog, 105.5) == "did not finish starting in 5 s (--worker-start-timeout)"
    counter.value = 1  # its first beat, seen at 106: from then on, judged by heartbeats only
    assert slot.hang(watchdog, 106.0) is None and slot.hang(watchdog, 107.5) is None
    assert slot.hang(watchdog, 108.5) == "sent no heartbeat for 2 s (--worker-timeout)"
    assert slot.hang(Watchdog(timeout_s=0, start_timeout_s=5), 1e6) is None
    slot.process.exitcode = -9
    assert slot.hang(watchdog, 1e6) is None


@pytest.mark.serial
@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="reads /proc for the worker processes")
def test_a_worker_stuck_while_starting_is_killed_after_the_start_timeout(shared_tiny_model, tmp_path):
    """A replacement worker stopped (SIGSTOP) before its first heartbeat, as one stuck loading its model, is
    killed after --worker-start-timeout, said so in one line, and replaced; the service has two workers again."""
    import os
    import signal
    import urllib.request

    log = tmp_path / "serve.log"
    server, base = _start_workers(shared_tiny_model[1], log, "--no-access-log", "--worker-start-timeout", "15")
    stuck = None
    try:
        known = _worker_pids(server)
        os.kill(min(known), signal.SIGKILL)  # its replacement comes after a 0.5 s wait
        # the replacement, caught within milliseconds of its spawn, long before it serves
        _wait_while(server, log, lambda: not (_worker_pids(server) - known), seconds=60, poll=0.005)
        stuck = min(_worker_pids(server) - known)
        os.kill(stuck, signal.SIGSTOP)
        line = f"Worker process [{stuck}] did not finish starting in 15 s (--worker-start-timeout); killed it"
        _wait_while(
            server,
            log,
            lambda: line not in log.read_text() or log.read_text().count("Application startup complete") < 3,
        )
        assert not _running(stuck) and len(_worker_pids(server)) == 2
        assert urllib.request.urlopen(base + "/health", timeout=10).read() == b'{"status":"ok"}'
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0
    finally:
        _end(server, stuck)
    assert "Traceback" not in log.read_text()


def _worker_pids(server) -> set[int]:
    """The live worker processes of ``seqlab serve --workers N`` (spawned: their command line says so)."""
    return {pid for pid, cmd in _descendants(server.pid).items() if "spawn_main" in cmd and _running(pid)}


@pytest.mark.serial
@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="reads /proc for the worker processes")
def test_a_hung_worker_is_killed_and_replaced(shared_tiny_model, tmp_path):
    """A worker stopped with SIGSTOP sends no heartbeat, as one whose event loop is blocked: the parent kills
    it after --worker-timeout, says so, and starts another, and the service answers with two workers again.
    The healthy worker is left alone, and a worker that hangs while the service stops is killed too."""
    import json
    import os
    import signal
    import urllib.request

    log = tmp_path / "serve.log"
    server, base = _start_workers(shared_tiny_model[1], log, "--no-access-log", "--worker-timeout", "2")
    victim = None
    try:
        assert len(_worker_pids(server)) == 2
        victim = min(_worker_pids(server))
        os.kill(victim, signal.SIGSTOP)
        _wait_while(server, log, lambda: _running(victim) or log.read_text().count("Application startup complete") < 3)
        assert f"Worker process [{victim}] sent no heartbeat for 2 s (--worker-timeout); killed it" in log.read_text()
        assert urllib.request.urlopen(base + "/health", timeout=10).read() == b'{"status":"ok"}'
        req = urllib.request.Request(
            base + "/predict", b'{"sentences": ["Stocks rose ."]}', {"content-type": "application/json"}
        )
        assert len(json.loads(urllib.request.urlopen(req, timeout=60).read())["predictions"]) == 1
        pids = set(_pids_of_persistent_connections(base, 24))
        assert len(pids) == 2 and victim not in pids and pids == _worker_pids(server)
        victim = min(pids)
        os.kill(victim, signal.SIGSTOP)  # hung as the service stops: SIGTERM alone would never end it
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0
    finally:
        _end(server, victim)
    text = log.read_text()
    assert f"Worker process [{victim}] sent no heartbeat for 2 s (--worker-timeout) while stopping; killing it" in text
    assert text.count("sent no heartbeat") == 2 and "Traceback" not in text


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="reads /proc for the worker processes")
def test_a_worker_that_keeps_dying_is_restarted_with_growing_delays(shared_tiny_model, tmp_path):
    """A worker killed, then each replacement killed as soon as it appears: the waits before the replacements
    double (0.5, 1, 2 s), and a SIGTERM during a wait stops the service, with status 0."""
    import os
    import signal

    log = tmp_path / "serve.log"
    server, _ = _start_workers(shared_tiny_model[1], log, "--no-access-log")
    try:
        known = _worker_pids(server)
        victim = min(known)
        for delay in ("0.5", "1", "2"):
            os.kill(victim, signal.SIGKILL)
            line = f"Worker process [{victim}] ended with status -9; starting another in {delay} s"
            _wait_while(server, log, lambda line=line: line not in log.read_text(), seconds=60, poll=0.05)
            if delay == "2":
                break
            # the replacement, started after its wait
            _wait_while(server, log, lambda: not _worker_pids(server) - known, seconds=60, poll=0.05)
            victim = min(_worker_pids(server) - known)
            known.add(victim)
        server.send_signal(signal.SIGTERM)  # during the 2 s wait
        assert server.wait(timeout=60) == 0
    finally:
        _end(server)
    assert "Traceback" not in log.read_text()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env() -> dict:
    import os
    from pathlib import Path

    return dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_device_that_is_not_there_is_one_line_before_serving(shared_tiny_model, capsys, workers):
    import torch

    from seqlab.cli import main

    devices = ["tpu"] + ([] if torch.cuda.is_available() else ["cuda"])
    for device in devices:
        code = main(
            [
                "-q",
                "serve",
                str(shared_tiny_model[1]),
                "--port",
                str(_free_port()),
                "--workers",
                workers,
                "--device",
                device,
            ]
        )
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1, err
        assert err[0] == (
            "error: device: expected auto, cpu or cuda, got 'tpu'"
            if device == "tpu"
            else "error: device 'cuda' was asked for, but this PyTorch sees no CUDA GPU"
        )


def test_a_worker_app_runs_on_the_device_it_is_given(shared_tiny_model, monkeypatch):
    from seqlab.serving.app import app_from_env

    monkeypatch.setenv("SEQLAB_SERVE_MODEL", str(shared_tiny_model[1]))
    monkeypatch.setenv("SEQLAB_SERVE_DEVICE", "cpu")
    assert TestClient(app_from_env()).get("/info").json()["device"] == "cpu"
    monkeypatch.setenv("SEQLAB_SERVE_DEVICE", "tpu")
    with pytest.raises(SystemExit) as stop:  # uvicorn's start-up failure status: no restart loop
        app_from_env()
    assert stop.value.code == 3
