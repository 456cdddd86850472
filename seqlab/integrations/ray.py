"""Ray Data adapter: tag a dataset's sentences on a pool of Ray workers, each loading the model once.

    import ray
    from seqlab.integrations.ray import SeqlabPredictor

    ds = ray.data.from_items([{"text": "He reckons the current account deficit will narrow ."}])
    tagged = ds.map_batches(SeqlabPredictor, fn_constructor_kwargs={"model": "runs/chunking/model"},
                            concurrency=2, batch_size=256)  # Ray >= 2.51: compute=ray.data.ActorPoolStrategy(size=2)
    tagged.take(1)  # or tag_dataset(ds, "runs/chunking/model", concurrency=2)
    # [{"text": "He reckons ...", "tags": ["B-NP", "B-VP", ...],
    #   "spans": [{"type": "NP", "start": 0, "end": 1, "text": "He"}, ...]}]

Schema. Input: a column ``tokens`` (each row a list of strings, one per token) or ``text`` (each row a string,
split as ``seqlab predict`` splits raw text: at whitespace, or into characters for character models); ``tokens``
wins when both are there, ``column=`` names another (a string row is raw text, a list row is tokens).
Output: the batch with two columns added, JSON-friendly: ``tags`` (a list of strings per row, in the scheme of
the model's training files) and ``spans`` (a list per row of ``{"type", "start", "end", "text"}``, tokens
``start`` to ``end - 1``; with ``confidence=True`` also ``"confidence"``: the span's probability, None for a
decoder that has none). A token-list input column comes back as lists of strings. Batches may be dicts of NumPy
arrays (Ray's default batch format) or pandas DataFrames (``batch_format="pandas"``).

Ray is not imported here: :class:`SeqlabPredictor` is a plain callable class (Ray constructs one per worker of
the pool), so this module, and seqlab, import without Ray. ``pip install 'seqlab[ray]'`` installs Ray Data.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from seqlab.errors import SeqlabError

INPUT_COLUMNS = ("tokens", "text")  # looked for in this order


class SeqlabPredictor:
    """Callable class for ``Dataset.map_batches``: loads the model once in ``__init__`` (once per Ray worker),
    then tags each batch it is called with.

    model: a model folder or ``.zip``. column: the input column (default: ``tokens``, else ``text``).
    batch_size: sentences per network call (default: the model's eval batch size). max_length: longer
    sentences are tagged in pieces. confidence: add each span's probability. device: cpu, cuda or auto.
    threads: PyTorch threads in this worker (Ray gives each worker ``OMP_NUM_THREADS`` = its CPUs).
    """

    def __init__(
        self,
        model: str | Path,
        column: str | None = None,
        batch_size: int | None = None,
        max_length: int | None = None,
        confidence: bool = False,
        device: str = "cpu",
        threads: int | None = None,
    ):
        from seqlab.tagger import Tagger

        if threads is not None:
            import torch

            torch.set_num_threads(threads)
        self.tagger = Tagger.load(model, device)
        self.column, self.batch_size, self.max_length, self.confidence = column, batch_size, max_length, confidence

    def __call__(self, batch):
        """``batch``: a dict of NumPy arrays or a pandas DataFrame with the input column; returns the same kind
        of batch with ``tags`` and ``spans`` added (other columns untouched; token lists as lists of str)."""
        if not (isinstance(batch, dict) or hasattr(batch, "assign")):
            raise TypeError(
                f"expected a batch as a dict of NumPy arrays or a pandas DataFrame, got "
                f"{type(batch).__name__} (use batch_format='numpy' or 'pandas')"
            )
        column = self._input_column(list(batch.keys()))
        inputs = [_sentence(row, column, i) for i, row in enumerate(batch[column])]
        preds = self.tagger.predict(  # each row alone (link=False): a batch's rows are not one document
            inputs, self.batch_size, max_length=self.max_length, confidence=self.confidence, link=False
        )
        added = {"tags": [list(p.tags) for p in preds], "spans": [[self._span(s) for s in p.spans] for p in preds]}
        if not any(isinstance(x, str) for x in inputs):  # token lists go back as lists of str (NumPy arrays of
            added[column] = inputs  # objects would be stored pickled)
        if isinstance(batch, dict):
            return {**batch, **{name: _objects(values) for name, values in added.items()}}
        import pandas as pd

        return batch.assign(
            **{name: pd.Series(values, index=batch.index, dtype=object) for name, values in added.items()}
        )

    def _input_column(self, names: list[str]) -> str:
        if self.column is not None:
            if self.column not in names:
                raise SeqlabError(f"no column '{self.column}' in the batch; its columns: {names}")
            return self.column
        for name in INPUT_COLUMNS:
            if name in names:
                return name
        raise SeqlabError(f"expected a column 'tokens' (lists of strings) or 'text' (strings), got the columns {names}")

    def _span(self, span) -> dict:
        out = {"type": span.type, "start": span.start, "end": span.end, "text": span.text}
        if self.confidence:
            out["confidence"] = span.confidence
        return out


def _sentence(row, column: str, i: int) -> str | list[str]:
    """A row as the tagger takes it: a string (raw text) or a list of token strings."""
    if isinstance(row, str):  # NumPy's str_ is a str
        return row
    if not isinstance(row, (Sequence, np.ndarray)):
        raise SeqlabError(
            f"column '{column}', row {i}: expected a string or a list of token strings, got {type(row).__name__}"
        )
    tokens = list(row)
    for t in tokens:
        if not isinstance(t, str) or not t.strip():
            raise SeqlabError(f"column '{column}', row {i}: expected non-empty token strings, got {t!r}")
    return [str(t) for t in tokens]  # plain str, not NumPy's str_


def _objects(values: list) -> np.ndarray:
    """A 1-D object array of ``values`` (``np.array`` would make a 2-D array of lists of equal length)."""
    out = np.empty(len(values), dtype=object)
    for i, value in enumerate(values):
        out[i] = value
    return out


def tag_dataset(
    ds, model: str | Path, concurrency: int = 1, batch_size: int = 256, batch_format: str = "default", **options
):
    """``ds`` with ``tags`` and ``spans`` added: :class:`SeqlabPredictor` on a pool of ``concurrency`` Ray workers
    (``options``: its keyword arguments), ``batch_size`` rows per call. Lazy, as every Ray Data transformation."""
    from ray.data import ActorPoolStrategy  # map_batches(concurrency=N) says the same, deprecated since Ray 2.51

    return ds.map_batches(
        SeqlabPredictor,
        fn_constructor_kwargs={"model": str(model), **options},
        compute=ActorPoolStrategy(size=concurrency),
        batch_size=batch_size,
        batch_format=batch_format,
    )
