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
