"""Take the README's screenshot of the web viewer: serve MODEL on a free local port, type TEXT, tag it, save PNG.

    python docs/screenshot.py MODEL OUT.png "TEXT" [--explain]

Needs the serve extra, Playwright and Debian's chromium (as tests/test_viewer.py)."""

from __future__ import annotations

import argparse
import shutil
import socket
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("out")
    parser.add_argument("text")
    parser.add_argument("--explain", action="store_true")
    parser.add_argument("--nbest", default="1")
    args = parser.parse_args()
    import uvicorn
    from playwright.sync_api import sync_playwright

    from seqlab.serve import create_app
    from seqlab.tagger import Tagger
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(Tagger.load(args.model)), host="127.0.0.1", port=port,
                                           log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
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
    server.should_exit = True


if __name__ == "__main__":
    main()
