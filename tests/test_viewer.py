"""The web viewer end to end in headless Chromium: type a sentence, wait for the highlight, and check that the
page's entity spans, their colours and the legend agree with the API's answer. Skipped, saying why, where no
browser or Playwright is installed (``make test`` installs Playwright; ``.ci/run`` installs Debian's chromium)."""

from __future__ import annotations

import shutil
import socket
import threading
import time

import pytest

from seqlab import Tagger

pytest.importorskip("fastapi", reason="the viewer is served by the HTTP API: pip install 'seqlab[serve]'")
uvicorn = pytest.importorskip("uvicorn", reason="the viewer is served by the HTTP API: pip install 'seqlab[serve]'")
sync_api = pytest.importorskip("playwright.sync_api", reason="the browser test drives Chromium with Playwright: "
                                                             "pip install playwright")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip("no Chromium on this machine (apt-get install chromium): the viewer test needs a browser",
                allow_module_level=True)

from seqlab.serve import create_app  # noqa: E402

SENTENCE = "He reckons the current account deficit will narrow to only # 1.8 billion in September ."


@pytest.fixture(scope="module")
def server(shared_tiny_model):
    tagger = Tagger.load(shared_tiny_model[1])
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(create_app(tagger), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    for _ in range(200):
        if srv.started:
            break
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}", tagger
    srv.should_exit = True
    thread.join(timeout=10)


def test_viewer_highlights_what_the_api_predicts(server, tmp_path):
    url, tagger = server
    expected = tagger.predict([SENTENCE], confidence=True)[0]
    assert expected.spans
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        requests = []
        page.on("request", lambda r: requests.append(r.url))
        page.goto(url + "/")
        page.fill("#text", SENTENCE)
        page.click("#tag")
        page.wait_for_selector("#result[data-ready='1'] mark.ent", timeout=20_000)
        marks = page.eval_on_selector_all("mark.ent", """els => els.map(e => ({
            type: e.dataset.type, start: +e.dataset.start, end: +e.dataset.end,
            colour: getComputedStyle(e).backgroundColor, title: e.title}))""")
        legend = dict(page.eval_on_selector_all("#legend .swatch", """els => els.map(e => [e.dataset.type,
            getComputedStyle(e).backgroundColor])"""))
        tokens = page.eval_on_selector_all(".sentence .tok", "els => els.map(e => [e.textContent, e.title])")
        page.screenshot(path=str(tmp_path / "viewer.png"), full_page=True)
        browser.close()
    assert [(m["type"], m["start"], m["end"]) for m in marks] == [(s.type, s.start, s.end) for s in expected.spans]
    for m, span in zip(marks, expected.spans):
        assert m["colour"] == legend[m["type"]]  # the highlight uses the legend's colour for its type
        assert f"{100 * span.confidence:.1f}%" in m["title"]  # span confidence on hover
    assert len({legend[t] for t in {m["type"] for m in marks}}) == len({m["type"] for m in marks})
    assert [t for t, _ in tokens] == expected.tokens
    assert all(title.startswith(tag + " (") for (_, title), tag in zip(tokens, expected.tags))
    assert all(u.startswith(url) for u in requests)  # nothing fetched from anywhere else
