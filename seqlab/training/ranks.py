"""Where a process stands in a data-parallel run (:class:`Ranks`), its collectives, and its share of each batch.

One process is ``Ranks()``; :mod:`seqlab.training.distributed` starts the ranks of ``seqlab train --nproc N``
and says how batches are sharded and losses scaled.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor
from torch.nn.parallel import DistributedDataParallel

from seqlab.data.batching import Batch, Collator, Encoded, collate
from seqlab.errors import SeqlabError

RNG_PREFIX = "rng.rank"  # checkpoint tensors (beside the weight average's): the torch RNG state of rank r > 0
CUDA_RNG_PREFIX = "rng.cuda.rank"  # and its GPU's generator state, for ranks on GPUs


@dataclass
class Shard:
    """This process's part of one optimisation step."""

    batch: Batch  # its sentences of the step's batch; a stand-in sentence when it has none
    scale: float | None = None  # the weight of its summed loss; None: one process, the batch's own sum or mean
    counted: bool = True  # False for a stand-in: scale 0, and its loss is left out of the epoch's loss


@dataclass(frozen=True)
class Ranks:
    """Where this process stands in a run: rank ``rank`` of ``world`` (``Ranks()``: the only process).
    Methods named as collectives must be called by every rank, in the same order."""

    rank: int = 0
    world: int = 1

    @property
    def main(self) -> bool:
        """Rank 0: scores dev, writes every file, logs."""
        return self.rank == 0

    def place(self, device: torch.device) -> torch.device:
        """One GPU per rank (cuda:rank); CPU ranks share the CPU."""
        if self.world > 1 and device.type == "cuda":
            return torch.device("cuda", self.rank)
        return device

    def shard(
        self, groups: list[list[int]], items: list[Encoded], featurizers: Mapping[str, Collator], reduction: str
    ) -> list[Shard]:
        """This rank's part of each batch (``groups``: positions in ``items``, as
        :func:`seqlab.data.batching.batch_groups` gives them), collated, with its loss weight."""
        if self.world == 1:
            return [Shard(collate([items[i] for i in g], g, featurizers)) for g in groups]
        shards = []
        for g in groups:
            mine = g[self.rank :: self.world]
            rows = mine or g[:1]  # a stand-in keeps the rank in step (DDP needs every rank's backward)
            scale = self.world / (1 if reduction == "sum" else len(g)) if mine else 0.0
            shards.append(Shard(collate([items[i] for i in rows], rows, featurizers), scale, bool(mine)))
        return shards

    def replicate(self, tagger) -> object:
        """Collective. What the training steps call ``.loss(batch)`` on: the tagger's network itself, or DDP
        around it (DDP copies rank 0's weights to every rank and averages the gradients in backward), once
        every rank is found to have built the same vocabularies."""
        if self.world == 1:
            return tagger.net
        vocab = {"features": {name: f.state() for name, f in tagger.featurizers.items()}, "tags": tagger.tags.itos}
        digest = hashlib.sha256(json.dumps(vocab, ensure_ascii=False, sort_keys=True).encode()).hexdigest()
        digests = self._gather(digest)
        if len(set(digests)) > 1:
            raise SeqlabError(
                "data-parallel ranks built different vocabularies from the same corpus: "
                "train with --nproc 1 and report this"
            )
        return DataParallelLoss(tagger.net, tagger.device)

    def barrier(self) -> None:
        """Collective: wait for every rank."""
        if self.world > 1:
            dist.barrier()

    def sum(self, value: float) -> float:
        """Collective: the sum of every rank's ``value``."""
        return value if self.world == 1 else sum(self._gather(value))

    def broadcast(self, obj):
        """Collective: rank 0's ``obj`` on every rank."""
        if self.world == 1:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def rng_states(self, device: torch.device) -> dict[str, Tensor]:
        """Collective: on rank 0, the torch RNG state of each other rank (``rng.rank{r}``) and, for ranks on GPUs
        (``device``: this rank's), its GPU's (``rng.cuda.rank{r}``), for the checkpoint; empty on the other ranks
        and for one process."""
        if self.world == 1:
            return {}
        mine = [torch.get_rng_state()] + ([torch.cuda.get_rng_state(device)] if device.type == "cuda" else [])
        out = {}
        for r, states in enumerate(self._gather(mine)):
            if r:
                out[f"{RNG_PREFIX}{r}"] = states[0]
                if len(states) > 1:
                    out[f"{CUDA_RNG_PREFIX}{r}"] = states[1]
        return out if self.main else {}

    def own_rng(self, extra: dict[str, Tensor], seed: int, device: torch.device) -> dict[str, Tensor]:
        """``extra`` (a checkpoint's extra tensors) without the ranks' RNG states. A rank > 0 takes its states
        from them (its GPU's too where it runs on one and they hold it), or a seed of its own when it has none (a
        fresh run, or more ranks than the checkpoint's run): its dropout masks differ from rank 0's."""
        if self.rank:
            state = extra.get(f"{RNG_PREFIX}{self.rank}")
            gpu_state = extra.get(f"{CUDA_RNG_PREFIX}{self.rank}")
            for s in (state, gpu_state):
                if s is not None and (s.dtype != torch.uint8 or s.dim() != 1):
                    raise SeqlabError(f"checkpoint: the RNG state of rank {self.rank} is not a byte vector")
            if state is None:
                torch.manual_seed(seed * 1_000_003 + self.rank)  # the GPUs' generators too
            else:
                torch.set_rng_state(state)
                if gpu_state is not None and device.type == "cuda":
                    torch.cuda.set_rng_state(gpu_state, device)
        return {k: v for k, v in extra.items() if not k.startswith((RNG_PREFIX, CUDA_RNG_PREFIX))}

    def _gather(self, obj) -> list:
        out = [None] * self.world
        dist.all_gather_object(out, obj)
        return out


class _Loss(torch.nn.Module):
    """The network's training loss as a module's forward: DDP averages the gradients of what the forward of
    the module it wraps computes, and TaggerNet's forward decodes."""

    def __init__(self, net: torch.nn.Module, device: torch.device):
        super().__init__()
        self.net = net
        # In no loss: DDP's search for unused weights always finds this one (finding none, it warns on every
        # rank that the search was not needed; for some batches of some models it is).
        self.unused = torch.nn.Parameter(torch.zeros((), device=device))

    def forward(self, batch: Batch) -> Tensor:
        return self.net.loss(batch)  # (batch,)


class DataParallelLoss:
    """``loss(batch)`` through DistributedDataParallel: the backward of anything computed from it averages
    the gradients over the ranks."""

    def __init__(self, net: torch.nn.Module, device: torch.device):
        # find_unused_parameters: a layer may leave some weights out of a batch's loss (a lattice batch
        # without lexicon words); DDP then counts them as ready with a zero gradient on that rank.
        self.ddp = DistributedDataParallel(
            _Loss(net, device),
            find_unused_parameters=True,
            device_ids=[device.index] if device.type == "cuda" else None,
        )

    def loss(self, batch: Batch) -> Tensor:
        """Per-sentence losses, shape (batch,)."""
        return self.ddp(batch)
