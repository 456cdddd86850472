"""Bounded cost per input (issue 38): what tagging and loading cost in memory is known before it is allocated.

A sentence over the memory budget is one error line naming it and pointing at ``--max-length`` (predict,
evaluate; the server answers 413), batches over it run in parts with the same predictions, and model files that
do not fit their config (sizes, shapes, dtypes, an archive's declared sizes) are refused before a tensor is read.
The bounds are asserted in subprocesses under an address-space limit (RLIMIT_AS): with no room for the
allocation, a passing test shows a clean error instead of one."""

from __future__ import annotations

import functools
import json
import math
import os
import resource
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from seqlab import Tagger
from seqlab.cli import main
from seqlab.config import config_from_dict, load_config
from seqlab.data.corpus import load_corpus
from seqlab.data.sentence import Sentence
from seqlab.decoders import TagSet
from seqlab.errors import SeqlabError
from seqlab.runtime.cost import Budget, Cost, OverBudget, padded, parameter_shapes
from seqlab.tagging import inference
from seqlab.tagging.encoding import as_sentences
from seqlab.tagging.network import TaggerNet
from tests.conftest import (
    SAMPLE,
    first_sentences,
    skip_without_its_transformers,
    stand_in_state,
    tiny_config,
    torch_threads,
)
from tests.test_flat import ORGS, make_corpus, raw_config

ROOT = Path(__file__).resolve().parents[1]
#: Address space of the subprocesses: seqlab predicts with PyTorch in about 0.8 GiB; a sentence or file that
#: needs gigabytes cannot get them. A CUDA build of PyTorch maps more than that at import (its GPU libraries): there
#: the limit is what the import maps plus ROOM (:func:`address_limit`). The subprocesses see no GPU: the bounds are
#: the host's memory, and a CUDA context reserves far more address space than any limit here.
LIMIT = 3 << 29  # 1.5 GiB
ROOM = 3 << 28  # 0.75 GiB
CPU_ONLY = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
UNIT = "王小明毕业于清华大学，现任华为技术有限公司工程师。"  # 24 characters, 9 lexicon words
WORDS = ["The", "cat", "sat", "on", "the", "mat", "."]
KINDS = ("flat", "psa", "parallel")  # with pairwise tensors


def tiny_model(kind: str, root: Path) -> Path:
    """A tiny untrained model saved under ``root`` (built in a second: the cost of tagging does not depend on
    the weights): ``flat`` (FLAT on a lexicon), ``psa`` (PSA, Bi-LSTM, PSA), ``parallel`` (Bi-LSTM and the
    parallel attention of Li et al. 2019) or ``bilstm`` (a Bi-LSTM-CRF)."""
    folder = root / f"tiny-{kind}"
    if folder.exists():
        return folder
    root = root / f"tiny-{kind}-data"  # its own: nothing of the caller's is written over
    root.mkdir()
    if kind == "flat":
        corpus, lexicon = root / "flat.bmes", root / "lexicon.txt"
        make_corpus(corpus, 10)
        lexicon.write_text(
            "\n".join(ORGS + ["北京", "大学", "华为", "有限公司", "毕业", "工程师", "现任"]) + "\n", encoding="utf-8"
        )
        raw = raw_config(corpus, lexicon)
    else:
        data = root / "tiny.txt"
        data.write_text(first_sentences(SAMPLE, 10), encoding="utf-8")
        raw = tiny_config(data).model_dump(mode="json")
        if kind == "psa":
            layer = {"type": "psa_fusion", "window": 4, "attention_dropout": 0.0}
            raw["model"]["encoders"] = [layer, {"type": "bilstm", "hidden": 32, "dropout": 0.0}, layer]
        elif kind == "parallel":
            raw["model"]["encoders"].append({"type": "parallel_attention", "heads": 4})
    config = config_from_dict(raw)
    corpus = load_corpus(config.data, None)
    torch.manual_seed(0)
    Tagger.build(config, corpus.train, corpus.scheme).save(folder)
    return folder


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cost")
    return {kind: tiny_model(kind, root) for kind in (*KINDS, "bilstm")}


def assert_same_predictions(got, want) -> None:
    """The same tags, spans and every other field, and the same numbers to 1e-5 (relative): a batch cut into parts
    runs through other matrix kernels, whose sums may round differently in the last bits (AVX-512 CPUs)."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys()
        for key in want:
            assert_same_predictions(got[key], want[key])
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want)
        for a, b in zip(got, want):
            assert_same_predictions(a, b)
    elif isinstance(want, float):  # math.isclose: pytest.approx costs 50 us a number, and explanations have 1e5
        assert math.isclose(got, want, rel_tol=1e-5, abs_tol=1e-300), (got, want)
    else:
        assert got == want


def text(kind: str, tokens: int) -> str:
    """A raw-text line of ``tokens`` tokens for a model of ``kind``."""
    if kind == "flat":
        return (UNIT * (tokens // len(UNIT) + 1))[:tokens]
    return " ".join((WORDS * (tokens // len(WORDS) + 1))[:tokens])


@functools.cache
def address_limit() -> int:
    """:data:`LIMIT`, or what importing seqlab maps plus :data:`ROOM` where that is more."""
    script = "import seqlab; print(next(ln.split()[1] for ln in open('/proc/self/status') if ln.startswith('VmPeak:')))"
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=CPU_ONLY, check=True)
    return max(LIMIT, (int(proc.stdout) << 10) + ROOM)


def limiter() -> Callable[[], None]:
    """A ``preexec_fn`` that limits the child's address space to :func:`address_limit`, measured here in the parent."""
    limit = address_limit()
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def run_limited(args: list, script: str | None = None) -> subprocess.CompletedProcess:
    """``python -m seqlab ARGS`` (or ``python -c SCRIPT ARGS``) with its address space limited (:func:`limiter`)."""
    head = ["-c", script] if script else ["-m", "seqlab", "-q"]
    return subprocess.run(
        [sys.executable, *head, *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=CPU_ONLY,
        preexec_fn=limiter(),
        timeout=120,
        check=False,
    )


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    return lines[0]


# --------------------------------------------------------------------------------------------
# Long sentences
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["flat", "psa"])
def test_a_long_sentence_is_one_error_line_not_an_allocation(models, kind, tmp_path):
    """20,000 tokens: FLAT's lattice asked for 25.9 GB, PSA's pairwise tensors several. Under a 1.5 GiB limit the
    sentence is refused by name; the short one before it is tagged under the same limit."""
    short, long = tmp_path / "short.txt", tmp_path / "long.txt"
    short.write_text(text(kind, 300) + "\n", encoding="utf-8")
    long.write_text(text(kind, 12) + "\n" + text(kind, 20_000) + "\n", encoding="utf-8")
    ok = run_limited(["predict", models[kind], short])
    assert ok.returncode == 0 and len(ok.stdout.split("\n\n")) >= 1, ok.stderr[-2000:]
    line = one_error_line(run_limited(["predict", models[kind], long]))
    assert f"{long}:2: a sentence of 20000 tokens" in line and "memory budget" in line
    assert "tag it in pieces with --max-length" in line


def post(port: int, sentences: list) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/predict",
        json.dumps({"sentences": sentences}).encode(),
        {"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_the_server_answers_413_for_a_sentence_over_the_budget(models):
    """One HTTP request well within the server's limits (20,000 characters of 200,000) to a FLAT model served in
    a process limited to 1.5 GiB: 413 with a JSON error naming the sentence; the server answers the next one."""
    pytest.importorskip("uvicorn")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "seqlab", "serve", str(models["flat"]), "--port", str(port), "--no-access-log"],
        cwd=ROOT,
        env=CPU_ONLY,
        preexec_fn=limiter(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).close()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, server.stderr.read()[-2000:]
                time.sleep(0.2)
        status, body = post(port, ["短句。", text("flat", 20_000)])
        assert status == 413 and body["error"].startswith("sentence 2: a sentence of 20000 tokens needs about ")
        assert "send it in pieces of at most" in body["error"]
        assert post(port, ["短句。", text("flat", 200)])[0] == 200
    finally:
        server.terminate()
        server.communicate(timeout=30)
    assert server.returncode == 0


def test_evaluate_refuses_a_long_sentence_and_max_length_tags_it_in_pieces(models, tmp_path, capsys):
    data = tmp_path / "long.bmes"
    chars = text("flat", 6000)
    data.write_text("中 O\n国 O\n\n" + "".join(f"{c} O\n" for c in chars), encoding="utf-8")
    capsys.readouterr()
    assert main(["-q", "evaluate", str(models["flat"]), str(data)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {data}:4: a sentence of 6000 tokens") and "--max-length" in err
    assert main(["-q", "evaluate", str(models["flat"]), str(data), "--max-length", "1000"]) == 0
    assert "accuracy" in capsys.readouterr().out.lower()


@pytest.mark.parametrize("kind", KINDS)
def test_the_suggested_max_length_fits(models, kind):
    tagger = Tagger.load(models[kind])
    tagger.memory_budget = 32 << 20
    with pytest.raises(OverBudget) as caught:
        tagger.predict(["a", text(kind, 3000)])
    assert caught.value.index == 1 and "--max-length" in str(caught.value)
    pred = tagger.predict(["a", text(kind, 3000)], max_length=caught.value.fits)[1]
    assert pred.split_at and len(pred.tags) == 3000
    with pytest.raises(OverBudget) as again:  # the index is the call's sentence, not a piece of it
        tagger.predict(["a b c", text(kind, 3000), "a"], max_length=2 * caught.value.fits)
    assert again.value.index == 1


@pytest.mark.parametrize("kind", KINDS)
def test_batches_over_the_budget_run_in_parts_with_the_same_predictions(models, kind, monkeypatch):
    """A budget that every sentence fits alone but no whole batch: the batches run in parts, each within the
    budget (within its share where parts run side by side on two threads), and every prediction is the same."""
    tagger = Tagger.load(models[kind])
    sentences = [text(kind, n) for n in (5, 20, 45, 60, 75, 80, 85, 90, 100, 115, 130, 150)]
    with torch_threads(2):
        before = [p.to_dict() for p in tagger.predict(sentences, batch_size=12, confidence=True, explain=True)]
    seen = []
    real = inference.tag_batch

    def spy(tagger, batch, *args, **kwargs):
        lattice = max(
            [
                batch.mask.shape[1],
                *(
                    t.shape[1] + batch.mask.shape[1]
                    for f in batch.features.values()
                    for name, t in f.items()
                    if name == "heads"
                ),
            ]
        )
        seen.append((len(batch.index), lattice, threading.current_thread() is threading.main_thread()))
        return real(tagger, batch, *args, **kwargs)

    monkeypatch.setattr(inference, "tag_batch", spy)
    cost = tagger.cost(0, explain=True)
    longest = max(len(as_sentences(s, tagger.config.data)[0].tokens) for s in sentences) * (2 if kind == "flat" else 1)
    tagger.memory_budget = 2 * 3 * (cost.batch(1, longest) + cost.kept(longest))  # 3 of the longest per part
    with torch_threads(2):
        after = [p.to_dict() for p in tagger.predict(sentences, batch_size=12, confidence=True, explain=True)]
    assert_same_predictions(after, before)
    budget = tagger.budget(0, explain=True)
    assert len(seen) > 1 and sum(rows for rows, _, _ in seen) == len(sentences)
    for rows, length, main_thread in seen:
        assert cost.batch(rows, length) <= (budget.limit if main_thread else budget.limit // 2)


def test_the_explanations_of_a_call_are_bounded_together(models):
    tagger = Tagger.load(models["psa"])
    tagger.memory_budget = 256 << 20
    tagger.predict([text("psa", 400)] * 2, explain=True)  # each fits, and the two together
    with pytest.raises(OverBudget, match="the explanations of 40 sentences need about") as caught:
        tagger.predict([text("psa", 400)] * 40, explain=True)
    assert caught.value.index is None
    tagger.predict([text("psa", 400)] * 40)  # without explanations nothing is kept


@pytest.mark.parametrize("kind", KINDS)
def test_the_estimate_bounds_the_measured_peak(models, kind, tmp_path):
    """Peak resident memory of tagging one sentence of 1,500 tokens (FLAT: about 2,000 lattice positions), in a
    fresh process, against the estimate (Linux: the peak is reset through /proc/self/clear_refs)."""
    if not Path("/proc/self/clear_refs").exists():
        pytest.skip("needs Linux's /proc/self/clear_refs")
    script = """if True:
        import json, sys
        import torch
        torch.set_num_threads(1)
        from seqlab import Tagger
        from seqlab.tagging.encoding import as_sentences
        from seqlab.tagging.inference import row_lengths
        tagger = Tagger.load(sys.argv[1])
        line = open(sys.argv[2], encoding="utf-8").read().strip()
        tagger.predict([line[:20]])

        def status(key):  # bytes
            return next(int(ln.split()[1]) << 10 for ln in open("/proc/self/status") if ln.startswith(key + ":"))
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # the peak (VmHWM) starts again from here
        before = status("VmRSS")
        tagger.predict([line], confidence=True)
        peak = status("VmHWM") - before
        length = max(row_lengths(tagger, as_sentences([line], tagger.config.data), [0], tagger.budget()))
        print(json.dumps([peak, tagger.cost().batch(1, length)]))
    """
    (tmp_path / "line.txt").write_text(text(kind, 1500), encoding="utf-8")
    proc = run_limited([models[kind], tmp_path / "line.txt"], script)
    assert proc.returncode == 0, proc.stderr[-2000:]
    peak, estimate = json.loads(proc.stdout.strip().splitlines()[-1])
    assert 30 << 20 < peak <= estimate, (peak, estimate)


def test_cost_arithmetic():
    cost = Cost(position=100, pair=10, kept_pair=2)
    assert cost.batch(3, 50) == 3 * (50 * 100 + 2500 * 10) and cost.kept(50) == 5000
    n = cost.fits(1 << 20, ratio=1.5)
    assert cost.batch(1, round(n * 1.5)) <= 1 << 20 < cost.batch(1, round((n + 2) * 1.5))
    budget = Budget(cost, 1 << 20, threads=2)
    assert budget.limit == budget.kept_limit == 1 << 19  # explanations get half
    parts = budget.parts(list(range(6)), [100] * 6, [100] * 6)  # 110,000 bytes a row, 524,288 a batch
    assert [len(p) for p in parts] == [4, 2]
    assert budget.side_by_side(2, 100) and not budget.side_by_side(3, 100)  # a half each on two threads
    assert padded([0, 1], [10, 50], [60, 55]) == 100  # most tokens (50) and most lattice words (50), padded apart
    with pytest.raises(OverBudget, match=r"^x.txt:7: a sentence of 300 tokens \(450 lattice positions\) needs"):
        budget.check(0, "x.txt", 7, 300, 450)


# --------------------------------------------------------------------------------------------
# Model files
# --------------------------------------------------------------------------------------------


def copy_model(models, tmp_path, name: str) -> Path:
    folder = tmp_path / name
    shutil.copytree(models["bilstm"], folder)
    return folder


def set_config(folder: Path, edit) -> Path:
    meta = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    edit(meta["config"]["model"])
    (folder / "config.json").write_text(json.dumps(meta), encoding="utf-8")
    return folder


def sparse_weights(folder: Path) -> Path:
    with open(folder / "model.safetensors", "r+b") as f:
        f.truncate(3 << 30)  # 3 GiB, nearly all a hole: no disk, and gigabytes if read
    return folder


def zip_with_big_entry(model: Path, out: Path, entry: str = "model.safetensors", size: int = 1 << 30) -> Path:
    """A .zip of the model whose ``entry`` is ``size`` zero bytes: a few MB on disk."""
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for name in ("config.json", "vocab.json", "model.safetensors"):
            if name != entry:
                zf.write(model / name, name)
        with zf.open(entry, "w", force_zip64=True) as f:
            chunk = bytes(1 << 20)
            for _ in range(size >> 20):
                f.write(chunk)
    return out


MODEL_CASES = [
    (
        "sparse-weights",
        lambda m, t: sparse_weights(copy_model(m, t, "sparse")),
        ["model.safetensors is 3,221,225,472 bytes", "bytes of weights"],
    ),
    (
        "hidden-16384",
        lambda m, t: set_config(copy_model(m, t, "wide"), lambda c: c["encoders"][0].update(hidden=16384)),
        ["model.safetensors does not fit the config", "the network needs [32768, "],
    ),
    (
        "parameters-over-the-limit",
        lambda m, t: set_config(copy_model(m, t, "huge"), lambda c: c["encoders"][0].update(hidden=16384, layers=4)),
        ["config.json: the network it describes has", "bytes of parameters"],
    ),
    (
        "zip-entry-of-1-gib",
        lambda m, t: zip_with_big_entry(m["bilstm"], t / "bomb.zip"),
        ["model.safetensors is 1,073,741,824 bytes"],
    ),
    (
        "zip-vocab-of-1-gib",
        lambda m, t: zip_with_big_entry(m["bilstm"], t / "vocab-bomb.zip", "vocab.json"),
        ["vocab.json is 1,073,741,824 bytes (declared in the archive)"],
    ),
]


@pytest.mark.parametrize("case", MODEL_CASES, ids=[c[0] for c in MODEL_CASES])
def test_model_files_over_their_config_are_refused_before_they_are_read(models, tmp_path, case):
    _, make, needles = case
    line = one_error_line(run_limited(["info", make(models, tmp_path)]))
    for needle in needles:
        assert needle in line, line


def write_header(folder: Path, edit=None, length: int | None = None, extra: bytes = b"") -> Path:
    """model.safetensors with its header edited (``edit(header)``) or its length field replaced."""
    data = (folder / "model.safetensors").read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header, body = json.loads(data[8 : 8 + n]), data[8 + n :]
    if edit:
        edit(header)
    raw = json.dumps(header).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", length or len(raw)) + raw + body + extra)
    return folder


def first_tensor(header: dict) -> dict:
    return header[min(k for k in header if k != "__metadata__")]


HEADER_CASES = [
    ("header-length-huge", lambda f: write_header(f, length=1 << 60), "a header of 1152921504606846976 bytes"),
    ("header-not-json", lambda f: write_header(f, length=4), "its header is not JSON"),
    ("shape", lambda f: write_header(f, lambda h: first_tensor(h).update(shape=[3, 3])), "has shape [3, 3]"),
    ("dtype", lambda f: write_header(f, lambda h: first_tensor(h).update(dtype="F64")), "is torch.float64"),
    ("dtype-unknown", lambda f: write_header(f, lambda h: first_tensor(h).update(dtype="Q7")), "dtype 'Q7'"),
    ("offsets", lambda f: write_header(f, lambda h: first_tensor(h).update(data_offsets=[0, 4])), "bytes of data"),
    (
        "missing",
        lambda f: write_header(f, lambda h: h.pop(min(k for k in h if k != "__metadata__"))),
        "1 tensors missing",
    ),
    ("trailing-bytes", lambda f: write_header(f, extra=b"\0" * 64), "its header describes"),
    (
        "nested-header",
        lambda f: write_header(f, lambda h: h.update(__metadata__=json.loads("[" * 200 + "]" * 200))),
        "nested deeper",
    ),
]


@pytest.mark.parametrize("case", HEADER_CASES, ids=[c[0] for c in HEADER_CASES])
def test_a_safetensors_header_that_does_not_fit_is_one_error(models, tmp_path, case):
    _, edit, needle = case
    folder = edit(copy_model(models, tmp_path, "m"))
    with pytest.raises(SeqlabError, match="model.safetensors") as caught:
        Tagger.load(folder)
    assert needle in str(caught.value) and "\n" not in str(caught.value)


def test_loading_reads_each_file_once_and_within_its_limit(models, tmp_path, monkeypatch):
    from seqlab.tagging import modelfile

    reads = []
    real = modelfile.ModelSource.head

    def spy(self, name, size):
        reads.append((name, size))
        return real(self, name, size)

    monkeypatch.setattr(modelfile.ModelSource, "head", spy)
    folder = models["flat"]
    Tagger.load(folder)
    sizes = {name: (folder / name).stat().st_size for name in ("config.json", "vocab.json", "model.safetensors")}
    assert all(size <= sizes[name] + 1 for name, size in reads)  # no read asks for more than the file has
    assert [size for name, size in reads if name == "model.safetensors"][-1] == sizes["model.safetensors"] + 1
    Tagger.load(folder).save(tmp_path / "m.zip")
    tags = Tagger.load(folder).predict(["王小明"])[0].tags
    assert Tagger.load(tmp_path / "m.zip").predict(["王小明"])[0].tags == tags


CONFIGS = sorted((ROOT / "configs").rglob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_parameter_shapes_are_those_of_the_built_network(path):
    """Every shipped config: the shapes built with large tensors on the meta device, which loading checks the
    weights against, are the real network's."""
    config = load_config(path)
    skip_without_its_transformers(config)
    featurizers = {name: fc.build(name) for name, fc in config.model.embedder.features.items()}
    for f in featurizers.values():
        if hasattr(f, "vocab"):
            itos = ["<pad>", "<unk>", "a", "b"] + [f"w{i}" for i in range(3000)]
            f.load_state(stand_in_state(itos, tag_names=["n", "nr"], word_tags=[2], word_frequencies=[40]), "test")
    tags = TagSet(["O", "B-NP", "I-NP", "E-NP", "S-NP"], "BIOES")
    shapes = parameter_shapes(lambda: TaggerNet(config.model, featurizers, tags))
    real = TaggerNet(config.model, featurizers, tags).state_dict()
    assert shapes == {name: (tuple(t.shape), t.dtype) for name, t in real.items()}


def test_a_sentence_object_keeps_its_place_in_the_error(models):
    tagger = Tagger.load(models["flat"])
    tagger.memory_budget = 16 << 20  # 300 characters fit, not with their lattice words
    sentence = Sentence(list(text("flat", 300)), source="corpus.bmes", line=120)
    with pytest.raises(OverBudget, match=r"^corpus.bmes:120: a sentence of 300 tokens \(\d+ lattice positions\)"):
        tagger.predict_tags([sentence])
