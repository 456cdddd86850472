"""Load test of `seqlab serve` on loopback: N concurrent clients for a fixed time.

    python benchmarks/load_test.py MODEL [--clients 16] [--seconds 20] [--data FILE] [--port 8765]

Starts the server as a subprocess (127.0.0.1 only), sends one sentence per request from each client in a
loop (sentences cycled from --data, raw text, or a built-in list), and reports requests/s, sentences/s,
p50 / p99 latency, errors, and the server's resident memory before and after the load and its peak
(VmHWM from /proc). The request loops stop by themselves after --seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ["EU rejects German call to boycott British lamb .", "Peter Blackburn", "BRUSSELS 1996-08-22",
           "The European Commission said on Thursday it disagreed with German advice to consumers to shun "
           "British lamb until scientists determine whether mad cow disease can be transmitted to sheep ."]


def rss(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) // 1024  # MiB
    return out


def post(url: str, sentences: list[str]) -> None:
    body = json.dumps({"sentences": sentences, "confidence": True}).encode()
    req = urllib.request.Request(url, body, {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as reply:
        json.loads(reply.read())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--data", help="raw text, one sentence per line")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    texts = DEFAULT
    if args.data:
        texts = [ln.strip() for ln in Path(args.data).read_text(encoding="utf-8").splitlines() if ln.strip()]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    server = subprocess.Popen([sys.executable, "-m", "seqlab", "-q", "serve", args.model, "--host", "127.0.0.1",
                               "--port", str(args.port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{args.port}"
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(base + "/health", timeout=1).read()
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.1)
        post(base + "/predict", texts[:4])  # warm-up
        before = rss(server.pid)
        latencies: list[float] = []
        errors = [0]
        stop = time.perf_counter() + args.seconds
        lock = threading.Lock()

        def client(k: int) -> None:
            i = k
            while time.perf_counter() < stop:
                start = time.perf_counter()
                try:
                    post(base + "/predict", [texts[i % len(texts)]])
                    with lock:
                        latencies.append(time.perf_counter() - start)
                except Exception:  # noqa: BLE001 - counted
                    with lock:
                        errors[0] += 1
                i += args.clients

        start = time.perf_counter()
        threads = [threading.Thread(target=client, args=(k,)) for k in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - start
        after = rss(server.pid)
        info = json.loads(urllib.request.urlopen(base + "/info").read())
    finally:
        server.terminate()
        code = server.wait(timeout=30)
    lat = sorted(latencies)
    print(f"clients {args.clients}, {args.seconds:.0f} s, model {args.model}")
    print(f"requests {len(lat)} ({len(lat) / elapsed:.1f}/s), sentences/s {len(lat) / elapsed:.1f}, errors {errors[0]}")
    print(f"latency p50 {1000 * statistics.median(lat):.1f} ms, p99 {1000 * lat[int(0.99 * (len(lat) - 1))]:.1f} ms")
    print(f"network calls {info['batching']['network_calls']} for {len(lat) + 1} requests")
    print(f"server RSS before {before['VmRSS']} MiB, after {after['VmRSS']} MiB, peak {after['VmHWM']} MiB")
    print(f"server exit status after SIGTERM: {code}")


if __name__ == "__main__":
    main()
