"""A spaCy pipeline component that tags with a seqlab model.

    import spacy
    nlp = spacy.blank("en")
    nlp.add_pipe("seqlab", config={"model": "en-ner"})   # a named model, or a model folder / .zip
    doc = nlp("George Washington went to Washington .")
    [(e.text, e.label_, e._.seqlab_confidence) for e in doc.ents]

The factory ``seqlab`` is registered by the entry point ``spacy_factories`` of the seqlab package (install
``seqlab[spacy]``): spaCy finds it without an import. What it sets depends on the model (``mode: auto``):

* span models of task ``ner``: ``doc.ents`` (replacing any the document had);
* other span models (chunking): ``doc.spans[spans_key]`` (default ``"seqlab"``);
* models without spans (POS, ``scheme: none``): ``token.tag_``.

``mode`` may also be ``ents``, ``spans`` or ``tags``. Each span's probability (``Tagger.predict(...,
confidence=True)``: exact for the CRF and softmax decoders) is ``span._.seqlab_confidence``, each token's
``token._.seqlab_confidence`` (None where the decoder gives none).

Tokens: the seqlab tokens are spaCy's tokens (space tokens left out), so every span falls on spaCy's token
boundaries. A character model (``bmes`` data or the ``chars`` tokenizer) gets each non-space character of
spaCy's tokens as a token, and a span that ends inside a spaCy token is widened to that token's boundaries
(``Doc.char_span(..., alignment_mode="expand")``). ``nlp.pipe(texts, batch_size=N)`` tags N documents in one
call of the model, in batches of the component's ``batch_size`` sentences (its config; default 64). The model
loads when the component is made.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from spacy.language import Language
from spacy.tokens import Doc, Span, Token

EXTENSION = "seqlab_confidence"
MODES = ("auto", "ents", "spans", "tags")

for _cls in (Span, Token):
    if not _cls.has_extension(EXTENSION):
        _cls.set_extension(EXTENSION, default=None)


@Language.factory(
    "seqlab",
    default_config={
        "model": None,
        "mode": "auto",
        "spans_key": "seqlab",
        "batch_size": 64,
        "device": "cpu",
        "max_length": None,
    },
)
def make_component(
    nlp: Language,
    name: str,
    model: str | None,
    mode: str,
    spans_key: str,
    batch_size: int,
    device: str,
    max_length: int | None,
) -> SeqlabComponent:
    """``nlp.add_pipe("seqlab", config={"model": NAME_OR_PATH})``."""
    return SeqlabComponent(nlp, name, model, mode, spans_key, batch_size, device, max_length)


class SeqlabComponent:
    def __init__(
        self,
        nlp: Language,
        name: str,
        model: str | None,
        mode: str = "auto",
        spans_key: str = "seqlab",
        batch_size: int = 64,
        device: str = "cpu",
        max_length: int | None = None,
    ):
        from seqlab.data.tokenization import model_tokenizer
        from seqlab.errors import SeqlabError
        from seqlab.tagger import Tagger

        if not model:
            raise SeqlabError('the seqlab component needs a model: nlp.add_pipe("seqlab", config={"model": ...})')
        if mode not in MODES:
            raise SeqlabError(f"seqlab component: mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.name, self.model, self.spans_key, self.batch_size = name, model, spans_key, batch_size
        self.max_length = max_length
        self.tagger = Tagger.load(model, device)
        self.chars = model_tokenizer(self.tagger.config.data) == "chars"
        if mode == "auto":
            mode = "tags" if self.tagger.scheme == "none" else "ents" if self.tagger.config.task == "ner" else "spans"
        elif mode != "tags" and self.tagger.scheme == "none":
            raise SeqlabError(f"seqlab component: model {model} gives tags without spans: use mode 'tags'")
        self.mode = mode

    def __call__(self, doc: Doc) -> Doc:
        self._tag([doc])
        return doc

    def pipe(self, stream: Iterable[Doc], batch_size: int | None = None) -> Iterator[Doc]:
        from spacy.util import minibatch

        for docs in minibatch(stream, size=batch_size or self.batch_size):
            self._tag(docs)
            yield from docs

    def _sentence(self, doc: Doc):
        """The seqlab sentence of ``doc`` and each of its tokens' (start, end) characters in the doc."""
        from seqlab.data.sentence import Sentence

        offsets = []
        for token in doc:
            if token.text.isspace():
                continue
            if self.chars:
                offsets += [(token.idx + k, token.idx + k + 1) for k, ch in enumerate(token.text) if not ch.isspace()]
            else:
                offsets.append((token.idx, token.idx + len(token.text)))
        text = doc.text
        return Sentence([text[a:b] for a, b in offsets], extra={"text": text, "offsets": offsets}), offsets

    def _tag(self, docs: list[Doc]) -> None:
        built = [self._sentence(doc) for doc in docs]
        preds = self.tagger.predict(  # each doc alone (link=False): never another doc of the batch as its context
            [s for s, _ in built], self.batch_size, max_length=self.max_length, confidence=True, link=False
        )
        for doc, (_, offsets), pred in zip(docs, built, preds):
            if self.mode == "tags":
                self._set_tags(doc, offsets, pred)
                continue
            spans = []
            for s in pred.spans:
                span = doc.char_span(offsets[s.start][0], offsets[s.end - 1][1], label=s.type, alignment_mode="expand")
                if span is None:  # pragma: no cover - tokens come from the doc's own
                    continue
                span._.set(EXTENSION, s.confidence)
                spans.append(span)
            if self.mode == "ents":
                doc.ents = _without_overlaps(spans)
            else:
                doc.spans[self.spans_key] = spans
            if pred.token_confidence is not None:
                self._token_confidence(doc, offsets, pred.token_confidence)

    def _set_tags(self, doc: Doc, offsets, pred) -> None:
        by_start = {token.idx: token for token in doc}
        for (a, _), tag in zip(offsets, pred.tags):
            token = by_start.get(a)
            if token is not None:
                token.tag_ = tag
        if pred.token_confidence is not None:
            self._token_confidence(doc, offsets, pred.token_confidence)

    @staticmethod
    def _token_confidence(doc: Doc, offsets, confidence: list[float]) -> None:
        by_start = {token.idx: token for token in doc}
        for (a, _), p in zip(offsets, confidence):
            token = by_start.get(a)
            if token is not None:
                token._.set(EXTENSION, p)

    # spaCy serialises a pipeline's components: this one is its config (the model's name or path) alone
    def to_disk(self, path, *, exclude=()) -> None:
        pass

    def from_disk(self, path, *, exclude=()) -> SeqlabComponent:
        return self

    def to_bytes(self, *, exclude=()) -> bytes:
        return b""

    def from_bytes(self, data: bytes, *, exclude=()) -> SeqlabComponent:
        return self


def _without_overlaps(spans: list[Span]) -> list[Span]:
    """Spans widened to spaCy's tokens (character models) may overlap: the first of overlapping ones is kept."""
    out: list[Span] = []
    for span in spans:
        if not out or span.start >= out[-1].end:
            out.append(span)
    return out


__all__ = ["EXTENSION", "SeqlabComponent", "make_component"]
