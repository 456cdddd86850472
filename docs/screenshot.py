"""Take the docs' screenshot of the web viewer: serve MODEL on a free local port, type TEXT, tag it, save PNG.

    python docs/screenshot.py MODEL OUT.png "TEXT" [--nbest K] [--explain]

MODEL is a model folder or a named model. It runs `seqlab serve` (the serve extra) and needs Playwright and Debian's
chromium (as tests/test_viewer.py)."""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_up(url: str, server: subprocess.Popen, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            sys.exit(f"seqlab serve exited with status {server.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"seqlab serve did not answer {url} in {timeout_s:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("out")
    parser.add_argument("text")
    parser.add_argument("--explain", action="store_true")
    parser.add_argument("--nbest", default="1")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    port = free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    server = subprocess.Popen([sys.executable, "-m", "seqlab", "-q", "serve", args.model, "--port", str(port),
                               "--no-access-log"], env=env)
    try:
        wait_until_up(f"http://127.0.0.1:{port}/health", server)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1000, "height": 700})
            page.goto(f"http://127.0.0.1:{port}/")
            page.fill("#text", args.text)
            page.select_option("#nbest", args.nbest)
            if args.explain:
                page.check("#explain")
            page.click("#tag")
            page.wait_for_selector("#result[data-ready='1']")
            page.hover("mark.ent")
            page.screenshot(path=args.out, full_page=True)
            browser.close()
    finally:
        server.terminate()  # seqlab serve stops gracefully on SIGTERM
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
