"""Data-parallel training: ``seqlab train --nproc N`` (PyTorch DistributedDataParallel).

:func:`launch` starts N processes with torch.multiprocessing (a fork server where the platform has one,
else spawn) that meet on 127.0.0.1 at a free port: gloo on CPU, nccl with one GPU per process when the
training device is CUDA. Each runs :func:`seqlab.training.loop.train_rank` with its :class:`Ranks`. Without
``train.threads`` the CPU threads are divided among the processes.

Sharding: the epoch's batches are the ones a single process makes (same seed, same ``train.batch_size``
or ``train.batch_tokens``), and each batch is one optimisation step for all ranks together: rank r
takes its sentences r, r+N, r+2N, ... (a batch is sorted by length, so the shares have about equal
sizes). So ``train.batch_size`` stays the batch of one update whatever N is, and N changes the speed,
not the run. Every rank does one step per batch: when a batch has fewer sentences than there are ranks
(the last one of a length bucket), a rank without a sentence back-propagates a stand-in with weight 0.

Loss scaling: rank r back-propagates ``N * sum(its losses) / n`` (``n`` sentences in the whole batch;
``N * sum`` with ``train.loss_reduction: sum``); DDP averages the ranks' gradients, so every rank holds
the gradient of the whole batch's mean (or sum) loss, the one a single process computes. Clipping and
the optimiser step come after the average. With dropout 0 the weights equal a one-process run's up to
float rounding (tests/test_distributed.py).

Who writes: rank 0 alone scores dev, saves the model and checkpoints, writes the log and the results and
shows progress bars; the other ranks are silent. The checkpoint keeps every rank's torch RNG state (their
dropout masks differ), so ``--resume`` with the same N continues the same run; another N continues it
with the same updates, and fresh dropout streams for ranks the checkpoint does not have.

Failures: a rank reports its error to a file; the launcher then stops every rank and raises one
:class:`SeqlabError` (exit 2 for bad input, 1 for anything else, its traceback logged). A rank whose
launcher was killed exits within a second.
"""

from __future__ import annotations

import json
import logging
import multiprocessing.connection
import os
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
import warnings
from dataclasses import asdict
from pathlib import Path

import torch
import torch.distributed as dist

from seqlab.config import ExperimentConfig
from seqlab.errors import SeqlabError
from seqlab.io.files import atomic_write_json
from seqlab.runtime.devices import resolve_device
from seqlab.training.loop import TrainResult, train_rank
from seqlab.training.ranks import Ranks

log = logging.getLogger("seqlab")

MAX_PROCESSES = 64


class RankFailed(SeqlabError):
    """A rank failed on something other than bad input (a bug, a lost peer, a killed process)."""

    exit_code = 1


def launch(
    config: ExperimentConfig, out_dir: str | Path, data_root: str | None, resume: bool, progress: bool, nproc: int
) -> TrainResult:
    """Run :func:`seqlab.training.train` in ``nproc`` data-parallel processes; rank 0's TrainResult."""
    if not 1 <= nproc <= MAX_PROCESSES:
        raise SeqlabError(f"nproc: expected 1..{MAX_PROCESSES} processes, got {nproc}")
    device = resolve_device(config.train.device)
    if device.type == "cuda" and torch.cuda.device_count() < nproc:
        raise SeqlabError(
            f"--nproc {nproc} on CUDA needs one GPU per process; this machine has "
            f"{torch.cuda.device_count()} (--set train.device=cpu trains on CPU processes)"
        )
    if device.type == "cpu" and nproc > (os.cpu_count() or 1):
        log.warning("--nproc %d: more processes than the %d CPU cores", nproc, os.cpu_count() or 1)
    level = logging.getLogger("seqlab").getEffectiveLevel()
    context = _context()
    with tempfile.TemporaryDirectory(prefix="seqlab-ranks-") as tmp:
        reports = Path(tmp)
        args = (
            nproc,
            _free_port(),
            config,
            str(out_dir),
            data_root,
            resume,
            progress,
            level,
            str(reports),
            dict(os.environ),
            os.getpid(),
        )
        procs = [
            context.Process(target=_worker, args=(rank, *args), name=f"seqlab-rank{rank}") for rank in range(nproc)
        ]
        try:
            for p in procs:
                p.start()
            died = _watch(procs, reports)
        finally:
            _stop(procs)
        if died is not None or list(reports.glob("error-*.json")):
            raise _failure(reports, died or {})
        result = json.loads((reports / "result.json").read_text(encoding="utf-8"))
    return TrainResult(**{**result, "out_dir": Path(result["out_dir"])})


def _context():
    """Where the platform has it, a fork server: one process imports torch and seqlab once and forks each rank
    from there (it has run no torch code, so the ranks start clean, as spawned ones do, without importing
    everything again each: seconds per rank); spawn elsewhere."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return torch.multiprocessing.get_context("spawn")
    context = torch.multiprocessing.get_context("forkserver")
    # torch._dynamo: imported by the first optimiser a process makes (3 s of CPU), which every rank makes
    context.set_forkserver_preload(["seqlab.training", "torch._dynamo"])  # no effect once the server runs
    return context


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _watch(procs, reports: Path) -> dict[int, int] | None:
    """Wait until every rank has exited (None when all succeeded) or one failed: then the exit codes
    (negative: a signal) of the ranks that ended with an error, reported or not."""
    while True:
        alive = [p for p in procs if p.exitcode is None]
        if not alive:
            break
        multiprocessing.connection.wait([p.sentinel for p in alive], timeout=0.5)
        failed = {r: p.exitcode for r, p in enumerate(procs) if p.exitcode not in (None, 0)}
        if failed or list(reports.glob("error-*.json")):
            return failed
    return None


def _stop(procs) -> None:
    """End the ranks still running: SIGTERM, then SIGKILL after 5 seconds."""
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + 5
    for p in procs:
        if p.pid is not None:
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join()


def _failure(reports: Path, died: dict[int, int]) -> SeqlabError:
    """The error of the run: bad input if a rank reported one, else a rank that died without a report (a
    signal), else the earliest error reported (the others are mostly peers losing their connection)."""
    found = [json.loads(p.read_text(encoding="utf-8")) for p in reports.glob("error-*.json")]
    expected = sorted((r for r in found if r["expected"]), key=lambda r: r["time"])
    if expected:
        err = SeqlabError(expected[0]["message"])
        err.exit_code = expected[0]["exit_code"]
        return err
    silent = {rank: code for rank, code in died.items() if rank not in {r["rank"] for r in found}}
    if silent:
        rank, code = min(silent.items())
        how = f"exited with code {code}"
        if code < 0:
            how = f"was killed by {signal.Signals(-code).name if -code in signal.valid_signals() else -code}"
        return RankFailed(f"data-parallel rank {rank} {how}")
    first = min(found, key=lambda r: r["time"])
    log.error("data-parallel rank %d failed:\n%s", first["rank"], first["traceback"].rstrip())
    return RankFailed(f"data-parallel rank {first['rank']} failed: {first['message']}")


def _exit_with_launcher(launcher: int) -> None:
    """A thread that ends this rank once the launching process is gone (killed before it could stop its
    ranks), so that no rank trains on or waits for its peers. A rank's parent may be the fork server, which
    outlives the launcher while ranks run: the launcher's pid is what is watched."""

    def watch() -> None:
        while True:
            time.sleep(1.0)
            try:
                os.kill(launcher, 0)
            except (ProcessLookupError, PermissionError):  # gone (or its pid taken by another user's process)
                os._exit(1)

    threading.Thread(target=watch, name="seqlab-launcher-watch", daemon=True).start()


def _worker(
    rank: int,
    world: int,
    port: int,
    config,
    out_dir: str,
    data_root: str | None,
    resume: bool,
    progress: bool,
    level: int,
    reports: str,
    environ: dict[str, str],
    launcher: int,
) -> None:
    """One rank (a process of the launcher's): join the group, train, leave it; errors go to ``reports``."""
    _exit_with_launcher(launcher)
    os.environ.clear()  # the launcher's, not the fork server's of when it started ($SEQLAB_DATA, NCCL_*, ...)
    os.environ.update(environ)
    logging.basicConfig(
        level=level if rank == 0 else logging.ERROR, format="%(asctime)s %(levelname)s %(message)s", datefmt="%H:%M:%S"
    )
    logging.getLogger("torch").setLevel(logging.WARNING)
    if rank:
        warnings.simplefilter("ignore")
    code = 0
    try:
        device = resolve_device(config.train.device)
        if device.type == "cuda":
            torch.cuda.set_device(rank)  # collectives of Python objects go through the current device
        if config.train.threads is None:  # "all cores": shared among the ranks
            torch.set_num_threads(max(1, torch.get_num_threads() // world))
        cuda = device.type == "cuda"
        dist.init_process_group(
            "nccl" if cuda else "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world,
            device_id=torch.device("cuda", rank) if cuda else None,
        )
        if rank == 0:
            log.info("data-parallel training: %d processes (%s)", world, dist.get_backend())
        result = train_rank(config, out_dir, data_root, resume, progress and rank == 0, Ranks(rank, world))
        if result is not None:
            atomic_write_json(Path(reports) / "result.json", {**asdict(result), "out_dir": str(result.out_dir)})
    except KeyboardInterrupt:  # Ctrl-C reaches every rank: the launcher says "interrupted"
        code = 130
    except SeqlabError as err:  # reported first: the launcher stops every rank as soon as it sees a report
        code = err.exit_code
        _report(reports, rank, str(err), code, expected=True)
    except Exception as err:
        code = 1
        _report(reports, rank, f"{type(err).__name__}: {err}".splitlines()[0], code, expected=False)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    if code:
        sys.exit(code)


def _report(reports: str, rank: int, message: str, exit_code: int, expected: bool) -> None:
    atomic_write_json(
        Path(reports) / f"error-{rank}.json",
        {
            "rank": rank,
            "time": time.time(),
            "message": message,
            "exit_code": exit_code,
            "expected": expected,
            "traceback": "" if expected else traceback.format_exc(),
        },
    )
