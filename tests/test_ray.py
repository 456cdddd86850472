"""The Ray Data adapter: the predictor on its own (no Ray needed), then through ``ray.data`` on a local Ray."""

from __future__ import annotations

import numpy as np
import pytest

from seqlab import Tagger
from seqlab.errors import SeqlabError
from seqlab.integrations.ray import SeqlabPredictor, tag_dataset

WORDS = ["Stocks", "of", "the", "company", "rose", "sharply", "on", "Monday", "in", "New", "York", "trading"]
TOKENS = [[WORDS[(i + k) % len(WORDS)] for k in range(2 + i % 6)] + [str(i), "."] for i in range(40)]


def expected(tagger: Tagger, inputs) -> list[tuple[list, list]]:
    return [
        (p.tags, [{"type": s.type, "start": s.start, "end": s.end, "text": s.text} for s in p.spans])
        for p in tagger.predict(inputs)
    ]


def test_predictor_on_numpy_and_pandas_batches(shared_tiny_model):
    tagger = Tagger.load(shared_tiny_model[1])
    predictor = SeqlabPredictor(shared_tiny_model[1])
    same_length = np.array([["He", "rose", "."], ["Yes", "it", "did"]])  # (rows, tokens): a 2-D array of str
    out = predictor({"id": np.arange(2), "tokens": same_length})
    assert out["tags"].shape == (2,) and out["id"].tolist() == [0, 1]
    assert out["tokens"].tolist() == same_length.tolist()  # lists of str again, one per row
    assert list(zip(out["tags"], out["spans"])) == expected(tagger, same_length.tolist())
    pd = pytest.importorskip("pandas", reason="pandas comes with ray[data]")
    texts = [" ".join(t) for t in TOKENS[:5]]
    frame = predictor(pd.DataFrame({"text": texts, "n": range(5)}))
    assert list(frame.columns) == ["text", "n", "tags", "spans"]
    assert list(zip(frame["tags"], frame["spans"])) == expected(tagger, texts)
    scored = SeqlabPredictor(shared_tiny_model[1], confidence=True)(pd.DataFrame({"text": texts}))
    assert [[s["confidence"] for s in spans] for spans in scored["spans"]] == [
        pytest.approx([s.confidence for s in p.spans]) for p in tagger.predict(texts, confidence=True)
    ]


def test_predictor_says_what_it_expected(shared_tiny_model):
    predictor = SeqlabPredictor(shared_tiny_model[1])
    with pytest.raises(SeqlabError, match="expected a column 'tokens'.*'text'.*got the columns \\['words'\\]"):
        predictor({"words": np.array(["a b"])})
    with pytest.raises(SeqlabError, match="column 'tokens', row 1: expected non-empty token strings"):
        predictor({"tokens": np.array([["a"], [""]], dtype=object)})
    with pytest.raises(TypeError, match="dict of NumPy arrays or a pandas DataFrame, got list"):
        predictor([["a"]])


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray instance as light as it gets: 2 CPUs, no dashboard, a small object store."""
    import os

    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'seqlab[ray]')")
    pytest.importorskip("ray.data", reason="Ray Data is not installed (pip install 'seqlab[ray]')")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=100 * 1024**2,
        log_to_driver=False,
        configure_logging=False,
    )
    yield ray
    ray.shutdown()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # raised inside Ray Data about its own settings
def test_ray_data_tags_as_the_tagger_does(local_ray, shared_tiny_model):
    model = shared_tiny_model[1]
    tagger = Tagger.load(model)
    ds = local_ray.data.from_items([{"id": i, "tokens": t} for i, t in enumerate(TOKENS)])
    rows = ds.map_batches(
        SeqlabPredictor, fn_constructor_kwargs={"model": str(model)}, concurrency=2, batch_size=8
    ).take_all()
    rows.sort(key=lambda r: r["id"])  # Ray Data does not keep the order unless asked
    assert [r["id"] for r in rows] == list(range(len(TOKENS)))
    assert [(list(r["tags"]), [dict(s) for s in r["spans"]]) for r in rows] == expected(tagger, TOKENS)


def test_tag_dataset_is_map_batches_on_an_actor_pool():
    pytest.importorskip("ray.data", reason="Ray Data is not installed (pip install 'seqlab[ray]')")

    class Recorder:  # stands for a Dataset: what tag_dataset asks of map_batches
        def map_batches(self, fn, **kwargs):
            self.fn, self.kwargs = fn, kwargs
            return self

    ds = tag_dataset(Recorder(), "m", concurrency=3, batch_size=16, batch_format="pandas", confidence=True)
    assert ds.fn is SeqlabPredictor and ds.kwargs["fn_constructor_kwargs"] == {"model": "m", "confidence": True}
    assert ds.kwargs["compute"].min_size == ds.kwargs["compute"].max_size == 3
    assert ds.kwargs["batch_size"] == 16 and ds.kwargs["batch_format"] == "pandas"
