"""Load test of `seqlab serve` on loopback: N concurrent clients for a fixed time.

    python benchmarks/load_test.py MODEL [--clients 16] [--seconds 20] [--data FILE] [--port 8765]
        [--per-request K] [--no-confidence] [--engine torch|onnxruntime|auto] [--keep-alive] [--threads T]
        [--no-access-log] [--max-batch 64] [--max-wait-ms MS] [--workers N] [--client python|wrk] [--reference]

Starts the server as a subprocess (127.0.0.1 only), sends K sentences per request (default 1, with
confidence unless --no-confidence) from each client in a loop (sentences cycled from --data, raw text, or
a built-in list; a new connection per request, or with --keep-alive one persistent connection per client, as
requests.Session or httpx clients hold), and reports requests/s, sentences/s,
p50 / p99 latency, errors, and the server's resident memory before and after the load and its peak
(VmHWM from /proc; with --workers, summed over the server's processes). The request loops stop by
themselves after --seconds. With --client wrk the load comes from wrk (Debian's ``wrk``, C), one thread
holding --clients keep-alive connections, which leaves more of a shared machine's cores to the server.

With --reference, once the server has stopped, the same work is timed in one process without HTTP: the
same sentences through ``Tagger.predict`` in batches of the server's max batch (--max-batch), on the server's thread
count and engine, with the same confidence option and ``to_dict`` per prediction, and, for context, tags
alone (``predict_tags``) at batch 64. The load's sentences/s is reported against both.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = [
    "EU rejects German call to boycott British lamb .",
    "Peter Blackburn",
    "BRUSSELS 1996-08-22",
    "The European Commission said on Thursday it disagreed with German advice to consumers to shun "
    "British lamb until scientists determine whether mad cow disease can be transmitted to sheep .",
]


def rss(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) // 1024  # MiB
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/PID/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def post(url: str, sentences: list[str], confidence: bool = True) -> None:
    body = json.dumps({"sentences": sentences, "confidence": confidence}).encode()
    req = urllib.request.Request(url, body, {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as reply:
        json.loads(reply.read())


class KeepAliveClient:
    """One persistent HTTP/1.1 connection; reconnects once when the server closed it."""

    def __init__(self, port: int):
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def post(self, sentences: list[str], confidence: bool = True) -> None:
        body = json.dumps({"sentences": sentences, "confidence": confidence}).encode()
        for attempt in (0, 1):
            try:
                self.conn.request("POST", "/predict", body, {"content-type": "application/json"})
                reply = self.conn.getresponse()
                data = reply.read()
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                if attempt:
                    raise
        if reply.status != 200:
            raise RuntimeError(f"HTTP {reply.status}: {data[:300]!r}")
        json.loads(data)


@dataclass
class Load:
    """What the clients saw: requests answered, in how long, latency percentiles, failed requests."""

    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: int
    first_error: str = ""


def python_clients(args, texts: list[str], base: str) -> Load:
    """``--clients`` threads of this process, each a closed loop of requests (urllib, or http.client with
    ``--keep-alive``), every reply parsed as JSON."""
    per_req = args.per_request
    latencies: list[float] = []
    errors = [0]
    first_error: list[str] = []
    stop = time.perf_counter() + args.seconds
    lock = threading.Lock()

    def client(k: int) -> None:
        i = k
        conn = KeepAliveClient(args.port) if args.keep_alive else None
        while time.perf_counter() < stop:
            start = time.perf_counter()
            batch = [texts[(i + j) % len(texts)] for j in range(per_req)]
            try:
                if conn is None:
                    post(base + "/predict", batch, not args.no_confidence)
                else:
                    conn.post(batch, not args.no_confidence)
                with lock:
                    latencies.append(time.perf_counter() - start)
            except Exception as err:
                with lock:
                    errors[0] += 1
                    body = err.read()[:300] if hasattr(err, "read") else b""
                    first_error.append(f"{type(err).__name__}: {str(err)[:200]} {body!r}")
            i += args.clients * per_req

    start = time.perf_counter()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    lat = sorted(latencies) or [float("nan")]
    return Load(
        len(latencies),
        elapsed,
        1000 * statistics.median(lat),
        1000 * lat[int(0.99 * (len(lat) - 1))],
        errors[0],
        first_error[0] if first_error else "",
    )


WRK_SCRIPT = """
local bodies = {}
for line in io.lines("%s") do bodies[#bodies + 1] = line end
local i = 0
request = function()
  i = i %% #bodies + 1
  return wrk.format("POST", "/predict", {["Content-Type"] = "application/json"}, bodies[i])
end
"""


def wrk_client(args, texts: list[str], base: str) -> Load:
    """wrk (C, epoll; Debian's ``wrk``), one thread holding ``--clients`` keep-alive connections, each a closed
    loop over the same request bodies as the Python clients send. It costs a fraction of the CPU per request
    of Python clients, so on a shared machine more of the cores go to the server. Replies are counted by
    status (non-2xx and socket errors are errors), not parsed."""
    if shutil.which("wrk") is None:
        sys.exit("--client wrk: wrk is not installed (apt-get install wrk)")
    per_req = args.per_request
    with tempfile.TemporaryDirectory() as tmp:
        bodies = Path(tmp) / "bodies.jsonl"
        bodies.write_text(
            "".join(
                json.dumps(
                    {
                        "sentences": [texts[(k * per_req + j) % len(texts)] for j in range(per_req)],
                        "confidence": not args.no_confidence,
                    }
                )
                + "\n"
                for k in range(max(1, len(texts)))
            )
        )
        script = Path(tmp) / "post.lua"
        script.write_text(WRK_SCRIPT % bodies)
        out = subprocess.run(
            [
                "wrk",
                "-t1",
                f"-c{args.clients}",
                f"-d{args.seconds:g}s",
                "--latency",
                "--timeout",
                "60s",
                "-s",
                str(script),
                base + "/predict",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    done = re.search(r"(\d+) requests in ([\d.]+)(m?s|m)\b", out)
    requests, took = int(done.group(1)), float(done.group(2))
    seconds = {"s": took, "ms": took / 1000, "m": took * 60}[done.group(3)]
    bad = sum(int(n) for n in re.findall(r"Non-2xx or 3xx responses: (\d+)", out))
    bad += sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", out))
    return Load(
        requests,
        seconds,
        _wrk_ms(out, "50%"),
        _wrk_ms(out, "99%"),
        bad,
        "" if not bad else out.strip().splitlines()[-3],
    )


def _wrk_ms(out: str, percentile: str) -> float:
    value, unit = re.search(rf"^\s*{percentile}\s+([\d.]+)(us|ms|s)\s*$", out, re.M).groups()
    return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1000.0}[unit]


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (the workers of ``serve --workers N``)."""
    pids, k = [pid], 0
    while k < len(pids):
        for task in Path(f"/proc/{pids[k]}/task").glob("*"):
            children = task / "children"
            if children.exists():
                pids += [int(c) for c in children.read_text().split()]
        k += 1
    return pids


def _mib(memory: dict[int, dict[str, int]], key: str) -> int:
    return sum(m[key] for m in memory.values())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--data", help="raw text, one sentence per line")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--per-request", type=int, default=1, help="sentences in each request")
    parser.add_argument("--no-confidence", action="store_true", help="ask for tags and spans only")
    parser.add_argument("--engine", default="torch", help="the server's --engine (torch, onnxruntime or auto)")
    parser.add_argument("--keep-alive", action="store_true", help="one persistent connection per client")
    parser.add_argument("--threads", type=int, help="the server's --threads (default: its own)")
    parser.add_argument("--reference", action="store_true", help="then time the same work in-process at batch 64")
    parser.add_argument("--no-access-log", action="store_true", help="the server's --no-access-log")
    parser.add_argument("--max-batch", type=int, default=64, help="the server's --max-batch (and the reference's)")
    parser.add_argument("--max-wait-ms", type=float, help="the server's --max-wait-ms (default: its own)")
    parser.add_argument("--workers", type=int, default=1, help="the server's --workers")
    parser.add_argument(
        "--client",
        choices=["python", "wrk"],
        default="python",
        help="python: threads of this process; wrk: the C load generator (keep-alive)",
    )
    args = parser.parse_args()
    per_req = args.per_request
    texts = DEFAULT
    if args.data:
        texts = [ln.strip() for ln in Path(args.data).read_text(encoding="utf-8").splitlines() if ln.strip()]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "seqlab",
            "-q",
            "serve",
            args.model,
            "--host",
            "127.0.0.1",
            "--port",
            str(args.port),
            "--engine",
            args.engine,
            "--workers",
            str(args.workers),
        ]
        + ([] if args.threads is None else ["--threads", str(args.threads)])
        + (["--no-access-log"] if args.no_access_log else [])
        + ["--max-batch", str(args.max_batch)]
        + ([] if args.max_wait_ms is None else ["--max-wait-ms", str(args.max_wait_ms)]),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{args.port}"
    try:
        for _ in range(1200):
            try:
                urllib.request.urlopen(base + "/health", timeout=1).read()
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.1)
        for _ in range(4 * args.workers):
            post(base + "/predict", texts[:4])  # warm-up, and a check that replies parse
        pids = process_tree(server.pid)
        before = {pid: rss(pid) for pid in pids}
        cpu_before = sum(cpu_seconds(pid) for pid in pids)
        load = (wrk_client if args.client == "wrk" else python_clients)(args, texts, base)
        after = {pid: rss(pid) for pid in pids}
        server_cpu = sum(cpu_seconds(pid) for pid in pids) - cpu_before
        info = json.loads(urllib.request.urlopen(base + "/info").read())
    finally:
        server.terminate()
        code = server.wait(timeout=30)
    print(
        f"clients {args.clients} ({args.client}), {args.seconds:.0f} s, {per_req} sentence(s) per request, "
        f"confidence {not args.no_confidence}, keep-alive {args.keep_alive or args.client == 'wrk'}, server "
        f"workers {args.workers} x threads {info['batching']['threads']}, engine {args.engine}, model {args.model}"
    )
    sentences = per_req * load.requests
    print(
        f"requests {load.requests} ({load.requests / load.seconds:.1f}/s), sentences/s "
        f"{sentences / load.seconds:.1f}, errors {load.errors}"
    )
    print(
        f"server CPU {server_cpu:.1f} s in {load.seconds:.1f} s: {1000 * server_cpu / max(sentences, 1):.2f} ms per "
        f"sentence, {1000 * server_cpu / max(load.requests, 1):.2f} ms per request (the rest of the 2 cores: "
        f"clients)"
    )
    if load.first_error:
        print(f"first error: {load.first_error}")
    print(f"latency p50 {load.p50_ms:.1f} ms, p99 {load.p99_ms:.1f} ms")
    print(
        f"network calls of the worker that answered /info: {info['batching']['network_calls']}; server HTTP "
        f"stack {info.get('server', {}).get('http', '?')} + {info.get('server', {}).get('loop', '?')}"
    )
    print(
        f"server RSS ({len(pids)} process(es), summed) before {_mib(before, 'VmRSS')} MiB, after "
        f"{_mib(after, 'VmRSS')} MiB, peak {_mib(after, 'VmHWM')} MiB"
    )
    print(f"server exit status after SIGTERM: {code}")
    if args.reference:
        rate = sentences / load.seconds
        ref = json.loads(
            subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--reference-of",
                    args.model,
                    "--engine",
                    args.engine,
                    "--threads",
                    str(info["batching"]["threads"]),
                    "--data",
                    args.data or "",
                    "--batch",
                    str(args.max_batch),
                ]
                + (["--no-confidence"] if args.no_confidence else []),
                env=env,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        )
        print(
            f"in-process, {info['batching']['threads']} thread(s): the same work (text in, predictions out, "
            f"batch {args.max_batch}) {ref['same_work']:.1f} sentences/s, tags alone (batch 64) "
            f"{ref['tags_only']:.1f}; the load reached {100 * rate / ref['same_work']:.0f}% and "
            f"{100 * rate / ref['tags_only']:.0f}% of them"
        )


def reference(model: str, engine: str, threads: int, data: str, confidence: bool, batch: int = 64) -> dict:
    """Sentences/s of the server's work done in-process at ``batch`` (best of 3 passes), and of tags alone at
    batch 64."""
    import torch

    from seqlab import Tagger
    from seqlab.data.sentence import Sentence

    torch.set_num_threads(threads)
    texts = (
        DEFAULT
        if not data
        else [ln.strip() for ln in Path(data).read_text(encoding="utf-8").splitlines() if ln.strip()]
    )
    texts = (texts * (1 + 2048 // len(texts)))[:2048]
    tagger = Tagger.load(model)
    tagger.set_engine(engine)
    sentences = [Sentence(t.split()) for t in texts]

    def same_work() -> None:
        for k in range(0, len(texts), batch):
            [p.to_dict() for p in tagger.predict(texts[k : k + batch], batch_size=batch, confidence=confidence)]

    def tags_only() -> None:
        tagger.predict_tags(sentences, batch_size=64)

    out = {}
    for name, work in (("same_work", same_work), ("tags_only", tags_only)):
        work()  # warm-up
        best = min(_seconds(work) for _ in range(3))
        out[name] = len(texts) / best
    return out


def _seconds(work) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


if __name__ == "__main__":
    if "--reference-of" in sys.argv:  # the child process of --reference
        ref = argparse.ArgumentParser()
        ref.add_argument("--reference-of")
        ref.add_argument("--engine")
        ref.add_argument("--threads", type=int)
        ref.add_argument("--data")
        ref.add_argument("--no-confidence", action="store_true")
        ref.add_argument("--batch", type=int, default=64)
        a = ref.parse_args()
        print(json.dumps(reference(a.reference_of, a.engine, a.threads, a.data, not a.no_confidence, a.batch)))
    else:
        main()
