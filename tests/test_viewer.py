"""The web viewer end to end in headless Chromium: type a sentence, wait for the highlight, and check that the
page's entity spans, their colours and the legend agree with the API's answer. Skipped, saying why, where no
browser or Playwright is installed (``make test`` installs Playwright; ``.ci/run`` installs Debian's chromium)."""

from __future__ import annotations

import contextlib
import shutil
import socket
import threading
import time

import pytest

from seqlab import Tagger

pytest.importorskip("fastapi", reason="the viewer is served by the HTTP API: pip install 'seqlab[serve]'")
uvicorn = pytest.importorskip("uvicorn", reason="the viewer is served by the HTTP API: pip install 'seqlab[serve]'")
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="the browser test drives Chromium with Playwright: pip install playwright"
)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip(
        "no Chromium on this machine (apt-get install chromium): the viewer test needs a browser",
        allow_module_level=True,
    )

from seqlab.serving.app import create_app  # noqa: E402

SENTENCE = "He reckons the current account deficit will narrow to only # 1.8 billion in September ."


@contextlib.contextmanager
def serving(tagger: Tagger):
    """The app of ``tagger`` on a free loopback port, in a thread: yields its base URL."""
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
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        srv.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def server(shared_tiny_model):
    tagger = Tagger.load(shared_tiny_model[1])
    with serving(tagger) as url:
        yield url, tagger


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
        marks = page.eval_on_selector_all(
            "mark.ent",
            """els => els.map(e => ({
            type: e.dataset.type, start: +e.dataset.start, end: +e.dataset.end,
            colour: getComputedStyle(e).backgroundColor, title: e.title}))""",
        )
        legend = dict(
            page.eval_on_selector_all(
                "#legend .swatch",
                """els => els.map(e => [e.dataset.type,
            getComputedStyle(e).backgroundColor])""",
            )
        )
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


def test_viewer_shows_the_n_best_list_attention_maps_and_gates(tiny_corpus):
    """An attention model (a BiLSTM and a PSA fusion layer, untrained: random weights give varied paths):
    with n-best 3 and the explanation asked for, the page lists the API's three paths with their scores,
    draws one heat map per attention matrix the API returns, and captions the fusion gate of each token."""
    from seqlab.config import config_from_dict
    from seqlab.data.readers import read_conll
    from tests.conftest import tiny_config

    raw = tiny_config(tiny_corpus).model_dump(mode="json")
    raw["model"]["encoders"] = [{"type": "bilstm", "hidden": 16}, {"type": "psa_fusion", "window": 4}]
    tagger = Tagger.build(config_from_dict(raw), read_conll(tiny_corpus, label_column=2), "BIO")
    sentence = "Confidence in the pound is widely expected to take another sharp dive ."
    expected = tagger.predict([sentence], nbest=3, explain=True, confidence=True)[0]
    layers = [x for x in expected.explanation if x.attention is not None or x.gate_mean is not None]
    assert len(expected.nbest) == 3 and layers and any(x.gate_mean for x in layers)
    with serving(tagger) as url, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        errors = []
        page.on("pageerror", lambda err: errors.append(str(err)))
        page.goto(url + "/")
        page.fill("#text", sentence)
        page.select_option("#nbest", "3")
        page.check("#explain")
        page.click("#tag")
        try:
            page.wait_for_selector("#result[data-ready='1'] .sentence", timeout=20_000)
        finally:
            assert not errors, errors  # a script error stops the page before it marks itself ready
        rows = page.eval_on_selector_all("table.nbest tr", "els => els.map(r => [...r.cells].map(c => c.textContent))")
        captions = page.eval_on_selector_all(
            ".maps figure",
            """els => els.map(f => [f.querySelector('canvas').width,
            f.querySelector('figcaption').textContent])""",
        )
        browser.close()
    assert rows == [[f"#{k + 1}", f"{p.score:.3f}", " ".join(p.tags)] for k, p in enumerate(expected.nbest)]
    want = []
    for x in layers:
        if x.attention is not None:
            want.append(f"layer {x.layer}: attention (mean of heads)")
        want += [f"layer {x.layer}, head {k + 1}" for k in range(len(x.heads or []))]
        if x.gate_mean is not None:
            want.append(
                f"layer {x.layer}: fusion gate per token "
                + ", ".join(f"{t} {g:.2f}" for t, g in zip(expected.tokens, x.gate_mean))
            )
    assert [c for _, c in captions] == want
    n = len(expected.tokens)
    assert all(width == 70 + 18 * n for width, _ in captions)  # a column per token
