"""HTTP API over a saved model."""

from __future__ import annotations

import pytest

from seqlab import Tagger, train
from tests.conftest import tiny_config

fastapi = pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from seqlab.serve import create_app  # noqa: E402


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
def client(tmp_path_factory):
    from seqlab.config import config_from_dict
    from seqlab.serve import Limits
    from tests.conftest import SAMPLE, first_sentences
    root = tmp_path_factory.mktemp("serve")
    data = root / "tiny.txt"
    data.write_text(first_sentences(SAMPLE, 20), encoding="utf-8")
    raw = tiny_config(data).model_dump(mode="json")
    raw["train"]["max_epochs"] = 2
    train(config_from_dict(raw), root / "run", progress=False)
    return TestClient(create_app(Tagger.load(root / "run" / "model"),
                                 Limits(max_sentences=5, max_chars=300, max_body_bytes=4000)))


BIG = "word " * 2000


@pytest.mark.parametrize("body,status", [
    (b'{"sentences": ["a b"', 422),  # not JSON
    (b'[]', 422),
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
])
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
    assert client.get("/openapi.json").json()["paths"]["/predict"]
