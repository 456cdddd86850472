"""Command line: a thin layer over the Python API.

    seqlab train CONFIG.yaml --out DIR [--budget 45m] [--max-epochs N] [--seeds 1,2,3] [--resume] [--set key=value ...]
        [--nproc N] [--data-root DIR]
    seqlab evaluate MODEL DATA [--output FILE] [--max-length N] [--engine torch|onnxruntime|auto]
    seqlab calibrate MODEL DEV_DATA [--out DIR] [--bins 10]
    seqlab predict MODEL [FILE|-] [--input-format auto|text|conll]
        [--output-format conll|jsonl|doccano|labelstudio|spacy-jsonl] [--tokenizer T] [--nbest K] [--explain]
        [--max-length N] [--workers N] [--engine torch|onnxruntime|auto]
    seqlab score FILE [--scheme auto|IOB1|BIO|BIOES|BMES]
    seqlab info MODEL
    seqlab analyze MODEL DATA [--keep H|C_all|C1..C5 ...] [--all-parts] [--seen-in TRAIN] [--json]
    seqlab attention MODEL "a sentence" --out heat.png
    seqlab serve MODEL [--host 127.0.0.1] [--port 8000] [--max-batch 64] [--max-wait-ms 5] [--workers N] [--threads N]
        [--engine torch|onnxruntime|auto] [--no-access-log]
        [--max-sentences N] [--max-chars N] [--max-body-bytes N] [--worker-timeout SECONDS]
        [--worker-start-timeout SECONDS]
    seqlab export MODEL --format onnx --out model.onnx      (or --format torchscript --out model.pt)
    seqlab demo --out DIR
    seqlab convert IN OUT [--from FORMAT] [--to FORMAT] [--tokenizer whitespace|english|chars] [--scheme BIO]
    seqlab models [NAME] [--json]
MODEL is a model folder, a .zip archive, or a named model (seqlab.tagging.named_models).
Bad input prints one line ``error: ...`` and exits with code 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from seqlab.errors import SeqlabError

if TYPE_CHECKING:
    from seqlab.data.formats import FormatGuess

log = logging.getLogger("seqlab")


MAX_SEED = 2**32 - 1  # numpy's seeds are 32-bit; torch and random take these too


def _seeds(text: str) -> list[int]:
    """``--seeds``: distinct integers in 0..2**32-1, comma-separated; anything else is refused here, before a
    run starts, not after one has trained."""
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got '{text}'") from None
    if not seeds:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got '{text}'")
    seen: set[int] = set()
    for seed in seeds:
        if not 0 <= seed <= MAX_SEED:
            raise argparse.ArgumentTypeError(f"seed {seed} is outside 0..{MAX_SEED}")
        if seed in seen:
            raise argparse.ArgumentTypeError(f"seed {seed} is given twice: each seed's run goes to OUT/seed-N")
        seen.add(seed)
    return seeds


def _int_in(low: int, high: int):
    """An argparse type: an integer in [low, high], else a message with the allowed range."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected an integer in {low}..{high}, got '{text}'")
        return value

    return parse


_beam = _int_in(1, 256)
_epochs = _int_in(1, 100_000)


def _budget(text: str) -> str:
    from seqlab.config import parse_duration

    try:
        parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text.strip()


_nproc = _int_in(1, 64)  # seqlab.training.distributed.MAX_PROCESSES
_batch = _int_in(1, 100_000)
_nbest = _int_in(1, 1000)
_length = _int_in(1, 10_000_000)
_chunk = _int_in(1, 1_000_000)
_workers = _int_in(1, 256)
_bins = _int_in(2, 100)


def _device_argument(parser: argparse.ArgumentParser, what: str = "the network runs") -> None:
    parser.add_argument("--device", default="cpu", help=f"cpu, cuda or auto: where {what} (default %(default)s)")


def _engine_argument(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument(
        "--engine",
        choices=["torch", "onnxruntime", "auto"],
        default=default,
        help="what runs the embedder and encoder layers: eager PyTorch; the network exported to "
        "onnxruntime in memory (faster on small CPU batches, slower on large ones; checked "
        "against torch at load); or auto: onnxruntime for batches of up to 4 sentences, "
        "torch for larger ones, torch alone where onnxruntime cannot run the model "
        "(default %(default)s)",
    )


def _wait(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 10_000:  # also refuses nan
        raise argparse.ArgumentTypeError(f"expected milliseconds in 0..10000, got '{text}'")
    return value


def _port(text: str) -> int:
    value = int(text) if text.isdigit() else 0
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 1-65535, got '{text}'")
    return value


class OneLineParser(argparse.ArgumentParser):
    """Command-line mistakes get one line naming the command and a pointer to its --help, exit 2 (argparse
    would print the whole usage block first)."""

    def error(self, message: str):
        self.exit(2, f"error: {self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="seqlab", description="Neural sequence labeling.")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars, warnings only")
    sub = p.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    t = sub.add_parser("train", help="train a tagger from a YAML config")
    t.add_argument("config")
    t.add_argument("--out", required=True, help="output folder")
    t.add_argument("--max-epochs", type=_epochs)
    t.add_argument(
        "--budget",
        type=_budget,
        metavar="TIME",
        help="wall-clock time of the whole run, such as 90s, 45m or 2.5h (train.budget): the schedule "
        "follows the clock, and the test scores are written inside it; with --resume the time "
        "already spent counts; with --seeds each seed gets this budget",
    )
    t.add_argument("--seeds", type=_seeds, help="e.g. 1,2,3,4,5: one run per seed, then mean/std/max")
    t.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint")
    t.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key")
    t.add_argument("--data-root", help="root of the data paths in the config (default $SEQLAB_DATA or ./data)")
    t.add_argument(
        "--nproc",
        type=_nproc,
        default=1,
        help="data-parallel processes (DistributedDataParallel: gloo on CPU, nccl with one GPU each); "
        "each trains on its share of every batch, the updates are those of one process",
    )

    e = sub.add_parser("evaluate", help="score a model on a labeled file")
    e.add_argument("model")
    e.add_argument("data")
    e.add_argument("--output", help="write predictions in conlleval format")
    e.add_argument("--batch-size", type=_batch)
    e.add_argument(
        "--strict",
        action="store_true",
        help="refuse gold labels unseen in training (by default they are scored as misses, as "
        "conlleval does, with a warning)",
    )
    _device_argument(e)
    e.add_argument("--beam", type=_beam, help="beam size of a beam-search decoder (1 = greedy)")
    _engine_argument(e, "torch")
    e.add_argument(
        "--max-length",
        type=_length,
        help="tag sentences longer than this many tokens in pieces (each "
        "split is logged; the pieces' tags are scored together)",
    )

    c = sub.add_parser(
        "calibrate",
        help="fit the temperature of a model's confidences on a labeled file "
        "(held-out data, e.g. dev) and save it in the model",
    )
    c.add_argument("model")
    c.add_argument("data")
    c.add_argument("--out", help="save the calibrated model here (default: replace MODEL)")
    c.add_argument("--bins", type=_bins, default=10, help="confidence bins of the calibration error (2-100)")
    c.add_argument("--batch-size", type=_batch)
    _device_argument(c)

    r = sub.add_parser("predict", help="tag raw text or a CoNLL file")
    r.add_argument("model")
    r.add_argument("file", nargs="?", default="-")
    r.add_argument(
        "--input-format",
        choices=["auto", "text", "conll", "raw"],
        default="auto",
        help="text (or raw): one sentence per line; conll: a column file, the token first, a blank line "
        "after each sentence; auto: decided on the evidence of the whole file (of stdin's first "
        "lines) and said on stderr (default %(default)s)",
    )
    r.add_argument(
        "--output-format",
        choices=["conll", "jsonl", "doccano", "labelstudio", "spacy-jsonl"],
        default="conll",
        help="doccano / labelstudio / spacy-jsonl: each record (or text line) with its "
        "predicted spans as character offsets, ready to import as pre-annotations; "
        "an annotation file in (.jsonl, .json, .spacy) is read as such "
        "(seqlab.data.annotations)",
    )
    r.add_argument(
        "--tokenizer",
        choices=["whitespace", "english", "chars"],
        help="how raw text and the text of annotation records is cut into tokens (default: the "
        "model's data.tokenizer; chars for bmes models, else whitespace)",
    )
    r.add_argument("--nbest", type=_nbest, help="also output the k best tag sequences (jsonl)")
    r.add_argument("--explain", action="store_true", help="attention weights and fusion gates (jsonl)")
    r.add_argument("--batch-size", type=_batch)
    _device_argument(r)
    r.add_argument("--beam", type=_beam, help="beam size of a beam-search decoder (1 = greedy)")
    _engine_argument(r, "torch")
    r.add_argument(
        "--chunk",
        type=_chunk,
        default=2000,
        help="sentences read, tagged and written at a time (memory stays bounded whatever the input size)",
    )
    r.add_argument(
        "--max-length",
        type=_length,
        help="tag sentences longer than this many tokens in pieces (each split is logged; jsonl gives split_at)",
    )
    r.add_argument(
        "--workers",
        type=_workers,
        default=1,
        help="processes tagging chunks in parallel, each loading the model once; the output keeps "
        "input order and is the same bytes as with 1",
    )

    s = sub.add_parser("score", help="conlleval replacement: last two columns are gold and predicted tags")
    s.add_argument("file")
    s.add_argument(
        "--scheme",
        default="auto",
        help="IOB1, BIO, BIOES or BMES: a tag of another scheme is an "
        "error; auto: detected from the tags (default %(default)s)",
    )

    i = sub.add_parser("info", help="describe a saved model")
    i.add_argument("model")

    z = sub.add_parser("analyze", help="entity chunking and typing analyses (Li et al. 2019, Tables 3-4)")
    z.add_argument("model")
    z.add_argument("data")
    z.add_argument(
        "--keep",
        "--ablate",
        dest="keep",
        action="append",
        default=[],
        metavar="PART",
        help="also analyse with only this named part of its layer left, every other part zeroed "
        "(a Table 3 ablation column: H, C_all, C1..C5); repeatable",
    )
    z.add_argument("--all-parts", action="store_true", help="one column per named part of the model")
    z.add_argument(
        "--seen-in",
        metavar="FILE",
        help="also score the entities whose text and type are labelled in FILE (usually the training file, in the "
        "model's data format) apart from the others",
    )
    z.add_argument("--json", action="store_true", help="JSON instead of tables")
    z.add_argument("--batch-size", type=_batch)
    _device_argument(z)

    a = sub.add_parser("attention", help="write the attention heatmap of each attention layer as PNG")
    a.add_argument("model")
    a.add_argument("sentence")
    a.add_argument("--out", required=True, help="PNG path; with several layers, -layerN is added")
    _device_argument(a)

    v = sub.add_parser("serve", help="HTTP JSON API (POST /predict) and web viewer (/)")
    v.add_argument("model")
    v.add_argument("--host", default="127.0.0.1")
    v.add_argument("--port", type=_port, default=8000)
    v.add_argument("--max-batch", type=_batch, default=64, help="sentences of concurrent requests tagged together")
    v.add_argument("--max-wait-ms", type=_wait, default=5.0, help="how long a request waits for others to join")
    v.add_argument(
        "--workers",
        type=_workers,
        default=1,
        help="server processes sharing the port, each with the model and its own micro-batching",
    )
    from seqlab.serving.supervisor import (
        WORKER_START_TIMEOUT_RANGE,
        WORKER_START_TIMEOUT_S,
        WORKER_TIMEOUT_RANGE,
        WORKER_TIMEOUT_S,
    )

    v.add_argument(
        "--worker-timeout",
        type=_int_in(*WORKER_TIMEOUT_RANGE),
        default=WORKER_TIMEOUT_S,
        metavar="SECONDS",
        help="with --workers 2 or more: a worker whose event loop sends no heartbeat "
        "for this long is killed and replaced (default %(default)s; 0: never)",
    )
    v.add_argument(
        "--worker-start-timeout",
        type=_int_in(*WORKER_START_TIMEOUT_RANGE),
        default=WORKER_START_TIMEOUT_S,
        metavar="SECONDS",
        help="with --workers 2 or more: a worker that has not finished starting (loading its model) "
        "after this long is killed and replaced (default %(default)s; 0: never)",
    )
    v.add_argument(
        "--threads",
        type=_workers,
        default=None,
        help="intra-op threads of the network (default: the CPU threads less one, at least 1: the "
        "HTTP event loop needs a core of its own)",
    )
    _engine_argument(v, "auto")
    _device_argument(v, "the network runs, in every worker (on a GPU the engine is PyTorch's: auto falls back to it)")
    from seqlab.serving.app import Limits

    for flag, what in [
        ("max_sentences", "sentences in one request"),
        ("max_chars", "characters of text or tokens in one request"),
        ("max_body_bytes", "bytes of one request's body"),
    ]:
        v.add_argument(
            "--" + flag.replace("_", "-"),
            type=_int_in(*Limits.RANGES[flag]),
            default=getattr(Limits, flag),
            help=f"at most this many {what}, else HTTP 413 (default %(default)s)",
        )
    v.add_argument(
        "--no-access-log",
        dest="access_log",
        action="store_false",
        help="no line per request on stderr (uvicorn's access log; 7%% of the event loop's time under load)",
    )

    x = sub.add_parser(
        "export", help="the network as ONNX (onnxruntime) or TorchScript (LibTorch); decoding step in NumPy"
    )
    x.add_argument("model")
    x.add_argument("--format", choices=["onnx", "torchscript"], default="onnx")
    x.add_argument("--out", required=True, help="the file to write (.onnx, or .pt for TorchScript)")

    k = sub.add_parser(
        "convert",
        help="convert between CoNLL / BMES columns and annotation formats (doccano, "
        "Label Studio, spaCy JSONL, spaCy DocBin)",
    )
    k.add_argument("input")
    k.add_argument("output")
    k.add_argument(
        "--from",
        dest="src_format",
        help="conll, bmes, doccano, labelstudio, spacy-jsonl or spacy "
        "(default: from the extension; any JSON flavour is read)",
    )
    k.add_argument(
        "--to", dest="dst_format", help="as --from (default: from the extension; .jsonl: doccano, .json: labelstudio)"
    )
    k.add_argument(
        "--tokenizer",
        choices=["whitespace", "english", "chars"],
        help="tokens of annotation text (default whitespace; chars with bmes)",
    )
    k.add_argument("--scheme", help="tag scheme of column files written (default BIO; BMES for bmes)")

    m = sub.add_parser(
        "models",
        help="list the named models (in $SEQLAB_MODELS and the repository's models/), or show one's model card",
    )
    m.add_argument("name", nargs="?", help="show this model's card")
    m.add_argument("--json", action="store_true", help="JSON instead of a table")

    d = sub.add_parser("demo", help="train, evaluate and use a chunker on the bundled CoNLL-2000 sample")
    d.add_argument("--out", default="runs/demo")
    d.add_argument("--max-epochs", type=_epochs)
    return p


def cmd_train(args) -> None:
    from seqlab.config import load_config
    from seqlab.training import train, train_seeds

    overrides = list(args.set)
    if args.max_epochs:
        overrides.append(f"train.max_epochs={args.max_epochs}")
    if args.budget:
        overrides.append(f"train.budget={args.budget}")
    config = load_config(args.config, overrides)
    if args.seeds:
        summary = train_seeds(config, args.out, args.seeds, args.data_root, args.resume, not args.quiet, args.nproc)
        print(json.dumps(summary, indent=2))
    else:
        result = train(config, args.out, args.data_root, args.resume, not args.quiet, args.nproc)
        print(
            json.dumps(
                {
                    "best_epoch": result.best_epoch,
                    "dev": _headline(result.dev),
                    "test": _headline(result.test),
                    "model": str(Path(args.out) / "model"),
                },
                indent=2,
            )
        )


def _headline(scores: dict | None) -> dict | None:
    return None if scores is None else {k: round(v, 2) for k, v in scores.items() if k != "per_type"}


def cmd_evaluate(args) -> None:
    from seqlab.evaluation.metrics import format_report, format_span_analysis
    from seqlab.tagger import Tagger
    from seqlab.training import evaluate

    tagger = Tagger.load(args.model, args.device, args.engine)
    tagger.max_length = args.max_length
    scores = evaluate(tagger, args.data, args.output, args.batch_size, args.strict, args.device, args.beam, args.engine)
    print(format_report(scores) + format_span_analysis(scores))


def cmd_calibrate(args) -> None:
    from seqlab.data.corpus import read_file
    from seqlab.evaluation.calibration import fit_temperature, reliability
    from seqlab.tagger import Tagger

    tagger = Tagger.load(args.model, args.device)
    from seqlab.tagging.named_models import resolve_model

    out = Path(args.out) if args.out else resolve_model(args.model)
    Tagger.check_save_target(out)  # a place it cannot or must not write: one line now, not after the fit
    sentences = read_file(Path(args.data), tagger.config.data)
    if not sentences or any(s.labels is None for s in sentences):
        raise SeqlabError("calibration needs gold labels", path=args.data)
    tagger.set_temperature(tagger.net.decoder.temperature)  # a decoder without probabilities fails here
    before = reliability(tagger, sentences, args.bins, args.batch_size)
    fit = fit_temperature(tagger, sentences, args.batch_size)
    tagger.set_temperature(fit.temperature)
    after = reliability(tagger, sentences, args.bins, args.batch_size)
    tagger.save(out)
    print(f"temperature {fit.previous:.4g} -> {fit.temperature:.4g} on {fit.sentences} sentences of {args.data}")
    print(f"negative log-likelihood per sentence: {fit.nll_before:.4f} -> {fit.nll_after:.4f}")
    for name in ("spans", "tokens"):
        b, a = getattr(before, name), getattr(after, name)
        if b.items:
            print(f"{name} ({b.items}): expected calibration error {b.value:.4f} -> {a.value:.4f}")
    print(f"saved {out} (the tags are unchanged)")


def _guess_input_format(
    path: Path | None, numbered: Iterator[tuple[int, str]]
) -> tuple[FormatGuess, Iterator[tuple[int, str]]]:
    """The format of predict's input on the evidence of every line of the file ``path`` (read once more; the
    memory stays constant), or of the first lines of stdin (``path`` None); and the numbered lines to tag."""
    import itertools

    from seqlab.data.formats import HEAD_LINES, guess_format
    from seqlab.data.readers import numbered_lines

    if path is not None:
        return guess_format(text for _, text in numbered_lines(path, "utf-8")), numbered
    head = list(itertools.islice(numbered, HEAD_LINES))
    return guess_format(text for _, text in head), itertools.chain(head, numbered)


def cmd_predict(args) -> None:
    """Tags a file or stdin of any size in constant memory: sentences are read lazily and tagged and
    written chunk by chunk (``--chunk`` sentences), in input order; with ``--workers N`` the chunks are
    tagged in N processes (:mod:`seqlab.serving.parallel`), the output unchanged."""
    from seqlab.data.readers import iter_conll, iter_raw, numbered_lines
    from seqlab.data.sentence import linked_chunks
    from seqlab.runtime.heap import freeze_loaded
    from seqlab.serving.parallel import PredictOptions, render_chunk, tag_in_processes
    from seqlab.tagger import Tagger

    tagger = Tagger.load(args.model, args.device, args.engine)
    if args.beam:
        tagger.set_beam(args.beam)
    freeze_loaded()  # this process tags until it exits
    # annotation records in or out, or text cut by another tokenizer than whitespace (chars for bmes models):
    # seqlab.data.annotations tags them, every token keeping its characters
    from seqlab.data.annotations import OUTPUTS, is_annotation_file, predict_annotations
    from seqlab.data.tokenization import model_tokenizer

    plain = "chars" if tagger.config.data.format == "bmes" else "whitespace"
    if (
        args.output_format in OUTPUTS
        or (args.input_format == "auto" and is_annotation_file(args.file))
        or (args.tokenizer or model_tokenizer(tagger.config.data)) != plain
    ):
        if args.workers > 1:
            raise SeqlabError("--workers: annotation records and tokenized text are tagged in one process")
        if not predict_annotations(
            tagger,
            args.file,
            args.output_format,
            args.tokenizer,
            args.batch_size,
            args.chunk,
            args.max_length,
            model_name=args.model,
            input_format="raw" if args.input_format == "text" else args.input_format,
            nbest=args.nbest,
            explain=args.explain,
        ):
            raise SeqlabError("no records to tag", path=args.file)
        return
    path: Path | None = None  # stdin
    if args.file == "-":
        source, numbered = "<stdin>", numbered_lines(sys.stdin.buffer, "utf-8", "<stdin>")
    else:
        path = Path(args.file)
        if not path.is_file():
            raise SeqlabError("no such file", path=path)
        source, numbered = str(path), numbered_lines(path, "utf-8")
    fmt, width = ("raw" if args.input_format == "text" else args.input_format), None
    if fmt == "auto":
        guess, numbered = _guess_input_format(path, numbered)
        fmt, width = guess.format, guess.width
        log.info(
            "%s: read as %s: %s (--input-format overrides)",
            source,
            "CoNLL columns" if fmt == "conll" else "raw text, one sentence per line",
            guess.reason,
        )
    chars = tagger.config.data.format == "bmes"
    sentences = iter_conll(numbered, source, width=width) if fmt == "conll" else iter_raw(numbered, source, chars)
    options = PredictOptions(args.output_format, args.batch_size, args.nbest, args.explain, args.max_length, True)
    chunks = linked_chunks(sentences, args.chunk, tagger.neighbours())  # the same context for any --chunk
    if args.workers > 1:
        tagged = tag_in_processes(
            args.model,
            chunks,
            options,
            args.workers,
            sys.stdout.write,
            args.device,
            args.beam,
            args.engine,
        )
    else:
        tagged = 0
        for chunk in chunks:
            tagged += len(chunk)
            sys.stdout.write(render_chunk(tagger, chunk, options))
    if not tagged:
        raise SeqlabError("no sentences to tag", path=source)


def cmd_score(args) -> None:
    from seqlab.evaluation.metrics import format_report, score_file

    print(format_report(score_file(args.file, args.scheme)))


def cmd_info(args) -> None:
    from seqlab.tagger import Tagger

    print(json.dumps(Tagger.load(args.model).info(), indent=2, ensure_ascii=False))


def cmd_attention(args) -> None:
    from seqlab.evaluation.plotting import plot_attention
    from seqlab.tagger import Tagger

    pred = Tagger.load(args.model, args.device).predict([args.sentence], explain=True)[0]
    layers = [x for x in (pred.explanation or []) if x.attention is not None]
    if not layers:
        raise SeqlabError("this model has no attention layer to show", path=args.model)
    out = Path(args.out)
    if not out.suffix:
        out = out.with_suffix(".png")  # the files are PNG whatever the name says
    maps = []  # (file suffix, weights, title): one per layer, or one per head of a multi-head layer
    for layer in layers:
        if layer.heads:
            maps += [
                (f"-layer{layer.layer}-head{h + 1}", w, f"encoder layer {layer.layer}, head C{h + 1}")
                for h, w in enumerate(layer.heads)
            ]
        else:
            maps.append((f"-layer{layer.layer}", layer.attention, f"encoder layer {layer.layer}"))
    for suffix, weights, title in maps:
        path = out if len(maps) == 1 else out.with_name(f"{out.stem}{suffix}{out.suffix}")
        plot_attention(pred.tokens, weights, path, title=title)
        print(path)


def cmd_analyze(args) -> None:
    from dataclasses import asdict

    from seqlab.data.corpus import read_file
    from seqlab.evaluation.analysis import analyze, format_analysis
    from seqlab.evaluation.seen import entity_keys
    from seqlab.tagger import Tagger

    tagger = Tagger.load(args.model, args.device)
    sentences = read_file(Path(args.data), tagger.config.data)
    if not sentences or any(s.labels is None for s in sentences):
        raise SeqlabError("the analyses need gold labels", path=args.data)
    keep = [None, *args.keep]
    if args.all_parts:
        keep += [name for name in tagger.net.column_names() if name not in keep]
    known = None
    if args.seen_in:
        known = entity_keys(read_file(Path(args.seen_in), tagger.config.data), tagger.scheme, tagger.joiner)
    parts = analyze(tagger, sentences, keep, args.batch_size, known)
    if args.json:
        print(json.dumps([asdict(p) for p in parts], indent=2))
    else:
        print(format_analysis(parts, args.seen_in), end="")


def cmd_export(args) -> None:
    from seqlab.io.files import check_writable
    from seqlab.serving.export import EXPORTERS

    out = Path(args.out)
    if out.is_dir():
        raise SeqlabError(f"--out names a folder; export writes one {args.format} file", path=out)
    if not out.parent.is_dir():
        raise SeqlabError("the folder of --out does not exist", path=out)
    check_writable(out)  # before the export's work; the atomic writer also turns a failed write into one line
    print(EXPORTERS[args.format](args.model, out))


def cmd_serve(args) -> None:
    from seqlab.serving.app import Limits
    from seqlab.serving.serve import run_server
    from seqlab.serving.supervisor import Watchdog
    from seqlab.tagging.named_models import resolve_model

    model = str(resolve_model(args.model))  # a name -> its folder: the workers get the path
    run_server(
        model,
        args.host,
        args.port,
        args.max_batch,
        args.max_wait_ms,
        args.workers,
        args.engine,
        args.threads,
        args.access_log,
        Limits(args.max_sentences, args.max_chars, args.max_body_bytes),
        Watchdog(args.worker_timeout, args.worker_start_timeout),
        args.device,
    )


def cmd_convert(args) -> None:
    from seqlab.data.annotations import convert

    n = convert(args.input, args.output, args.src_format, args.dst_format, args.tokenizer, args.scheme)
    print(f"wrote {n} sentences to {args.output}", file=sys.stderr)


def cmd_models(args) -> None:
    from seqlab.tagging.named_models import as_json, available, listing, resolve_model

    if args.name:
        folder = resolve_model(args.name)
        if not folder.is_dir():
            raise SeqlabError("no such model folder", path=folder)
        card = folder / "card.md"
        print(card.read_text(encoding="utf-8") if card.is_file() else f"{folder}: no card.md\n", end="")
        return
    models = available()
    print(json.dumps(as_json(models), indent=2, ensure_ascii=False) if args.json else listing(models), end="")


def cmd_demo(args) -> None:
    from seqlab.config import load_config
    from seqlab.evaluation.metrics import format_report
    from seqlab.tagger import Tagger
    from seqlab.training import evaluate, train

    config_path = Path(__file__).parent / "resources" / "demo.yaml"
    overrides = [f"train.max_epochs={args.max_epochs}"] if args.max_epochs else []
    config = load_config(config_path, overrides)
    print(f"Training a BiLSTM-CRF chunker on the bundled CoNLL-2000 sample ({config_path.name}) -> {args.out}")
    result = train(config, args.out, progress=not args.quiet)
    test_file = Path(__file__).parent / "resources" / "conll2000" / "test.txt"
    print(f"\nBest dev F1 {result.dev['f1']:.2f} at epoch {result.best_epoch}. Test sample ({test_file.name}):")
    print(format_report(evaluate(Path(args.out) / "model", test_file)))
    tagger = Tagger.load(Path(args.out) / "model")
    print("\nExample sentences:")
    for pred in tagger.predict(
        [
            "The European Union rejected the German call to boycott British lamb .",
            "He reckons the current account deficit will narrow to only # 1.8 billion in September .",
        ]
    ):
        print("  " + " ".join(f"{tok}/{tag}" for tok, tag in zip(pred.tokens, pred.tags)))
        print("    chunks: " + "  ".join(f"[{s.type} {s.text}]" for s in pred.spans))
    print(f"\nModel saved in {Path(args.out) / 'model'}; training curves in {Path(args.out) / 'curves.png'}")


COMMANDS = {
    "train": cmd_train,
    "evaluate": cmd_evaluate,
    "calibrate": cmd_calibrate,
    "predict": cmd_predict,
    "score": cmd_score,
    "info": cmd_info,
    "analyze": cmd_analyze,
    "attention": cmd_attention,
    "serve": cmd_serve,
    "export": cmd_export,
    "demo": cmd_demo,
    "convert": cmd_convert,
    "models": cmd_models,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        datefmt="%H:%M:%S",
    )
    try:
        COMMANDS[args.command](args)
    except SeqlabError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
