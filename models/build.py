"""Build the named models under models/ from the configs: ``make models``, or one at a time:

    python models/build.py train NAME [--data-root ../shared/data]   # train with the recipe below, then package
    python models/build.py package NAME RUN_DIR                      # package a finished run (results.json in it)
    python models/build.py list                                      # the names and their recipes

Each model is trained by ``seqlab train CONFIG --budget B`` into ``runs/models/NAME`` (checkpointed: a killed
build continues with the same command), then its ``model/`` folder is copied to ``models/NAME/`` with a model card:
``card.json`` (read by ``seqlab models``) and ``card.md``. Nothing is downloaded; the corpora are the shared copies
(``--data-root``), which the models' terms below describe.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"
CONLL_TERMS = (
    "CoNLL-2003 English (Reuters RCV1): the annotations are free for research; the Reuters text is "
    "licensed by NIST for research use. Use the model accordingly."
)
WSJ_TERMS = (
    "CoNLL-2000 (WSJ sections 15-18 and 20 of the Penn Treebank): freely redistributable for research, as "
    "the shared task distributed it."
)
RESUME_TERMS = "Resume NER (Zhang and Yang, 2018): released for research."
ONTONOTES_TERMS = (
    "OntoNotes 4.0 Chinese (LDC2011T03): LDC's licence, research use; check yours before using the model elsewhere."
)


@dataclass(frozen=True)
class Recipe:
    """How one named model is made, and what its card says."""

    config: str
    budget: str
    language: str
    task: str
    description: str
    data: str
    terms: str
    paper: float
    paper_source: str
    overrides: tuple[str, ...] = field(default=())


RECIPES = {
    "en-ner": Recipe(
        "configs/ner-conll2003-bilstm-crf.yaml",
        "20m",
        "en",
        "ner",
        "English NER, CoNLL-2003 types (PER, LOC, ORG, MISC); BiLSTM-CRF over GloVe 6B 50d",
        "CoNLL-2003 English, train 14,041 sentences",
        CONLL_TERMS,
        91.01,
        "Bi-LSTM-CRF, PSA paper (000) Table II, avg of runs",
        ("data.tokenizer=english",),
    ),
    "en-chunk": Recipe(
        "configs/chunking-bilstm-crf.yaml",
        "15m",
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
        "BiLSTM-CRF, characters embedded from scratch (it beat FLAT at a 30-minute budget here)",
        "Resume NER, train 3,821 sentences",
        RESUME_TERMS,
        93.48,
        "character baseline of Lattice LSTM, as FLAT's paper (002) Table 2 quotes it, with "
        "pre-trained character embeddings we do not have",
    ),
    "zh-ner-ontonotes": Recipe(
        "configs/ner-ontonotes4-flat.yaml",
        "30m",
        "zh",
        "ner",
        "Chinese NER, OntoNotes 4 types (PER, ORG, LOC, GPE); FLAT over jieba's lexicon",
        "OntoNotes 4 Chinese, train 15,740 sentences",
        ONTONOTES_TERMS,
        76.45,
        "FLAT, paper 002 Table 3 (with pre-trained Chinese embeddings we do not have)",
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
        "--budget",
        recipe.budget,
        "--data-root",
        data_root,
        "--resume",
    ]
    for override in recipe.overrides:
        command += ["--set", override]
    subprocess.run(command, check=True)
    return run


def package(name: str, run: Path) -> Path:
    """Copy ``run/model`` to ``models/NAME`` with its card."""
    recipe = RECIPES[name]
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    metric = results["metric"]
    target = MODELS / name
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(run / "model", target)
    size = sum(p.stat().st_size for p in target.iterdir())
    command = f"seqlab train {recipe.config} --budget {recipe.budget}" + "".join(
        f" --set {o}" for o in recipe.overrides
    )
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
        "size_bytes": size,
        "weights_dtype": "float32",
    }
    (target / "card.json").write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")
    test = card["scores"]["test"]
    (target / "card.md").write_text(
        f"""# {name}

{recipe.description}.

| | |
|---|---|
| language / task | {recipe.language} / {recipe.task} |
| data | {recipe.data} |
| test {metric} | **{test["value"]:.2f}** (the paper: {recipe.paper:.2f}, {recipe.paper_source}) |
| dev {metric} | {card["scores"]["dev"]["value"]:.2f} |
| training | {results["epochs_run"]} epochs in {results.get("elapsed_s", 0) / 60:.0f} minutes, seed {results["seed"]} |
| size | {size / 1e6:.1f} MB (float32) |

Rebuild: `python models/build.py train {name}` (or `{command}` and `python models/build.py package {name} RUN`).

Terms of the data: {recipe.terms}
""",
        encoding="utf-8",
    )
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description="build the named models")
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train")
    t.add_argument("names", nargs="*", help="default: all")
    t.add_argument("--data-root", default=str(ROOT.parent / "shared" / "data"))
    p = sub.add_parser("package")
    p.add_argument("name", choices=sorted(RECIPES))
    p.add_argument("run", type=Path)
    sub.add_parser("list")
    args = parser.parse_args()
    if args.command == "list":
        for name, recipe in RECIPES.items():
            print(f"{name}: {recipe.config} --budget {recipe.budget} {' '.join(recipe.overrides)}")
    elif args.command == "package":
        print(package(args.name, args.run))
    else:
        for name in args.names or list(RECIPES):
            print(package(name, train(name, args.data_root)))


if __name__ == "__main__":
    main()
