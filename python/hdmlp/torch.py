"""PyTorch integration: an IterableDataset over an hdmlp Loader.

    import torch, hdmlp.torch
    ds = hdmlp.torch.HdmlpIterableDataset("train.hdmlp", batch_size=256, memory="1G",
                                          seed=42, transform=decode)
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2,
                                     persistent_workers=True)
    for epoch in range(10):
        ds.set_epoch(epoch)                  # as with DistributedSampler
        for images, labels in dl:            # labels: int64 tensor
            ...

Batches, not samples: use DataLoader(batch_size=None). Each item is (samples, labels), or
(samples, labels, indices) with with_indices=True:
  - labels, indices: int64 tensors;
  - samples without a transform: uint8 tensors viewing the batch's memory (zero-copy;
    the batch stays alive while any of them does), or, when all samples have the same size
    and collate is 'auto' or True, one (n, size) uint8 tensor (one copy, done in C without
    the GIL);
  - with transform=f: [f(t) for t in those uint8 tensors], stacked into one tensor when
    they are tensors of one shape (collate 'auto'/True). The transform runs wherever
    __iter__ runs: in the DataLoader workers when num_workers > 0.

Ranks: rank/world default to torch.distributed (when initialised), else the RANK and
WORLD_SIZE (or OMPI_COMM_WORLD_RANK/SIZE) environment variables, else 0 of 1. With
world > 1 the ranks exchange samples over gRPC: the constructor (a collective call: every
rank must construct the dataset) picks a free port per loader on `host` (default: the
interface that reaches MASTER_ADDR, else 127.0.0.1) and gathers all ranks' endpoints, seeds
and a job token with torch.distributed (all_gather_object; seeds must agree). Pass
num_workers= the DataLoader's num_workers so each worker slot gets its endpoints. Without
torch.distributed, give peers= (a list of 'host:port' in rank order, or one such list per
worker) yourself. A rank serves its peers until they are done, so: pass epochs= (after the
last one each rank tells its peers it is finished; closing a loader of unbounded epochs
waits up to 30 s for quiet peers), keep ranks in step (DDP does), and don't iterate the
main process's loader (num_workers=0) before forking DataLoader workers (gRPC initialised
before fork() is not safe in the children).

Epochs: every iteration delivers one epoch. set_epoch(e) fixes the epoch of the next
iteration; without it, a process that keeps its loader (num_workers=0, or
persistent_workers=True) moves to the next epoch by itself. Non-persistent DataLoader
workers are new processes every epoch: call set_epoch(e) before each epoch, or every epoch
repeats epoch 0's order (DistributedSampler has the same rule). Reaching epoch e in a new
process reads and drops the e earlier epochs (libhdmlp cannot start at an epoch yet), so
prefer persistent_workers=True.

DataLoader workers (num_workers = W > 0): every worker runs its own loader over the rank's
whole sequence with memory/W bytes (and the same I/O threads setting) and keeps
the batches whose position in the epoch is ≡ worker id (mod W), dropping the others
unread by Python. DataLoader takes one batch from each worker in turn, so it yields
exactly the sequence of a single loader with memory/W, each sample once per epoch; the
cost is that every worker reads (and decompresses) every chunk. Decoding/transforms, the
expensive part, is split W ways.

Exact resume (num_workers=0): ds.state_dict() after some batches gives a small picklable
dict (the position after the last batch the DataLoader yielded, plus a pending set_epoch);
a new process makes the same dataset (same data, seed, batch_size, memory, drop_last,
rank/world) and calls ds.load_state_dict(state) before iterating; the next iteration
delivers the rest of the saved epoch, then the following epochs, exactly as an
uninterrupted run would (with world > 1 every rank saves after the same number of batches
and every rank resumes). A state from another dataset or configuration raises
hdmlp.InvalidArgumentError (a ValueError) naming the field. With DataLoader workers
(num_workers > 0) each worker process runs its own loader, invisible to the main process,
and prefetches ahead of what training consumed, so there is no exact state to save:
state_dict() then raises hdmlp.StateError, and a loaded state makes the workers raise
StateError instead of resuming anywhere else than exactly.
"""
import os
import random
import socket

import torch
from torch.utils.data import IterableDataset, get_worker_info

import hdmlp

__all__ = ["HdmlpIterableDataset", "rank_and_world"]


def rank_and_world():
    """(rank, world) from torch.distributed if initialised, else the environment."""
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except (ImportError, RuntimeError):
        pass
    env = os.environ
    for rank_var, world_var in (("RANK", "WORLD_SIZE"),
                                ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")):
        if rank_var in env and world_var in env:
            return int(env[rank_var]), int(env[world_var])
    return 0, 1


def _local_host():
    """Address other ranks can reach this one at: the interface that routes to MASTER_ADDR,
    or loopback for single-host jobs."""
    master = os.environ.get("MASTER_ADDR", "127.0.0.1")
    if master in ("127.0.0.1", "localhost", "::1"):
        return "127.0.0.1"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect((master, 9))  # UDP: no packet is sent
            return s.getsockname()[0]
        except OSError:
            return socket.gethostbyname(socket.gethostname())


def _free_port(host):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _gather_peers(rank, world, slots, seed, host):
    """[endpoints of every rank for worker slot w] for w < slots, and a job token, gathered
    with torch.distributed (collective)."""
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()):
        raise ValueError(f"world {world} > 1 needs peers=[...] or an initialised "
                         "torch.distributed process group to gather the ranks' endpoints")
    host = host or _local_host()
    mine = {"endpoints": [f"{host}:{_free_port(host)}" for _ in range(slots)], "seed": seed,
            "token": random.getrandbits(63)}
    everyone = [None] * world
    dist.all_gather_object(everyone, mine)
    seeds = {e["seed"] for e in everyone}
    if len(seeds) != 1:
        raise ValueError(f"seed: every rank must use the same seed, got {sorted(seeds)}")
    peers = [[everyone[r]["endpoints"][w] for r in range(world)] for w in range(slots)]
    return peers, everyone[0]["token"]


def _as_tensors(batch):
    """uint8 tensors viewing each sample of the batch (zero-copy)."""
    out = []
    for view in batch.views(writable=True):
        if len(view) == 0:
            out.append(torch.empty(0, dtype=torch.uint8))
        else:
            out.append(torch.frombuffer(view, dtype=torch.uint8))
    return out


class HdmlpIterableDataset(IterableDataset):
    """IterableDataset yielding one batch per item from an hdmlp Loader (see module doc).

    dataset: path of a packed dataset (or an hdmlp.Dataset). batch_size, memory (int bytes
    or '1G', '25%'), seed, drop_last and **loader_kwargs (threads, refill, policy, engine,
    lookahead, direct_io, storage_cost, remote_memory, prefetch, peer_timeout, tls) go to
    hdmlp.Loader. memory is this rank's total: with W DataLoader workers each gets memory/W.
    collate: 'auto' | True | False. num_workers, peers, host: for world > 1 (module doc).
    """

    def __init__(self, dataset, batch_size, memory, *, seed=0, transform=None, collate="auto",
                 with_indices=False, rank=None, world=None, drop_last=False, num_workers=0,
                 peers=None, host=None, **loader_kwargs):
        super().__init__()
        if collate not in ("auto", True, False):
            raise ValueError(f"collate: expected 'auto', True or False, got {collate!r}")
        if isinstance(dataset, hdmlp.Dataset):
            self._dataset = dataset
            self.path = dataset.path
        else:
            self.path = os.fspath(dataset)
            self._dataset = hdmlp.Dataset(self.path)
        if (rank is None) != (world is None):
            raise ValueError("rank and world: give both or neither")
        if rank is None:
            rank, world = rank_and_world()
        self.rank, self.world = int(rank), int(world)
        self.batch_size = batch_size
        self.memory = hdmlp.parse_memory(memory, self._dataset.raw_bytes)
        self.seed = 0 if seed is None else seed
        self.transform = transform
        self.collate = collate
        self.with_indices = with_indices
        self.drop_last = drop_last
        self.loader_kwargs = dict(loader_kwargs)
        self.classes = self._dataset.classes
        self.num_workers = num_workers
        self._peers = None  # one endpoint list per worker slot (world > 1)
        if self.world > 1:
            slots = max(1, num_workers)
            if peers is None:
                self._peers, token = _gather_peers(self.rank, self.world, slots, self.seed,
                                                   host)
                self.loader_kwargs.setdefault("job_token", token)
            else:
                peers = list(peers)
                self._peers = [list(p) for p in peers] if peers and not isinstance(
                    peers[0], str) else [peers]
                if len(self._peers) != slots:
                    raise ValueError(f"peers: {len(self._peers)} endpoint list(s) for "
                                     f"{slots} worker slot(s)")
        self._epoch = None      # set by set_epoch, used once by the next iteration
        self._loader = None     # per process
        self._loader_pid = None
        self._loader_share = None
        self._resume = None     # Loader state for the next loader made (load_state_dict)

    # -- epochs and length -------------------------------------------------------------
    def set_epoch(self, epoch):
        """The next iteration delivers epoch `epoch` (0-based)."""
        if epoch < 0:
            raise ValueError(f"epoch: expected >= 0, got {epoch}")
        self._epoch = int(epoch)

    def __len__(self):
        """Batches per epoch for this rank (what the DataLoader yields per epoch)."""
        n = len(self._dataset)
        per_rank = n // self.world + (1 if self.rank < n % self.world else 0)
        if self.drop_last:
            return per_rank // self.batch_size
        return -(-per_rank // self.batch_size)

    # -- exact resume --------------------------------------------------------------------
    STATE_FORMAT = "hdmlp.torch"
    STATE_VERSION = 1

    def state_dict(self):
        """Picklable position after the last batch yielded in this process (num_workers=0):
        {'format', 'version', 'loader': hdmlp.Loader.state_dict(), 'epoch': pending
        set_epoch or None}. Raises hdmlp.StateError when no loader runs in this process
        (not iterated yet, or iterated in DataLoader workers)."""
        loader = self._loader if self._loader_pid == os.getpid() else None
        if loader is not None and self._loader_share != 1:
            loader = None
        if loader is None:
            if self._resume is not None:  # loaded, not used yet: the same position
                return {"format": self.STATE_FORMAT, "version": self.STATE_VERSION,
                        "loader": self._resume, "epoch": self._epoch}
            raise hdmlp.StateError(
                "state_dict: no loader has run in this process; exact resume needs "
                "num_workers=0 (DataLoader workers each run their own loader and read "
                "ahead) and a state taken after iterating")
        return {"format": self.STATE_FORMAT, "version": self.STATE_VERSION,
                "loader": loader.state_dict(), "epoch": self._epoch}

    def load_state_dict(self, state):
        """Resume from state_dict()'s dict: the next iteration (num_workers=0) continues the
        saved epoch. Call before iterating. Another dataset or configuration raises
        hdmlp.InvalidArgumentError (ValueError) when the loader is made."""
        if not isinstance(state, dict):
            raise TypeError(f"state: expected the dict of state_dict(), got "
                            f"{type(state).__name__}")
        if state.get("format") != self.STATE_FORMAT:
            raise hdmlp.InvalidArgumentError(
                f"state: format {state.get('format')!r} is not {self.STATE_FORMAT!r}")
        if state.get("version") != self.STATE_VERSION:
            raise hdmlp.InvalidArgumentError(
                f"state: version {state.get('version')!r} is not supported (this hdmlp reads "
                f"version {self.STATE_VERSION})")
        if not isinstance(state.get("loader"), dict):
            raise hdmlp.InvalidArgumentError("state: missing the 'loader' dict")
        if self._loader is not None and self._loader_pid == os.getpid():
            if self.world > 1:
                raise hdmlp.StateError(
                    "load_state_dict: this rank's loader already runs and exchanges with its "
                    "peers; call load_state_dict before iterating")
            self._loader.close()
            self._loader = None
        self._resume = dict(state["loader"])
        epoch = state.get("epoch")
        self._epoch = None if epoch is None else int(epoch)

    # -- pickling (spawned DataLoader workers): open handles are per process -----------
    def __getstate__(self):
        state = self.__dict__.copy()
        state["_dataset"] = None
        state["_loader"] = None
        state["_loader_pid"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._dataset = hdmlp.Dataset(self.path)

    # -- iteration ---------------------------------------------------------------------
    def _get_loader(self, workers):
        pid = os.getpid()
        if self._loader is not None and (self._loader_pid != pid or
                                         self._loader_share != workers):
            # Inherited through fork (its threads do not exist here; the object knows and
            # will not free the C loader) or made for another worker count.
            self._loader = None
        if self._loader is None:
            kwargs = dict(self.loader_kwargs)
            if self._peers is not None:
                if len(self._peers) != workers:
                    raise RuntimeError(
                        f"HdmlpIterableDataset was built for {len(self._peers)} worker "
                        f"slot(s) but runs with {workers}: pass num_workers= the DataLoader's "
                        "num_workers when world > 1")
                info = get_worker_info()
                kwargs["peers"] = self._peers[info.id if info is not None else 0]
            if self._resume is not None:
                if get_worker_info() is not None:
                    raise hdmlp.StateError(
                        "HdmlpIterableDataset: a loaded state cannot be resumed exactly in "
                        "DataLoader workers (each runs its own loader); use num_workers=0 "
                        "for the epoch being resumed")
                kwargs["state"] = self._resume
            self._loader = hdmlp.Loader(
                self._dataset, self.batch_size, max(1, self.memory // workers), seed=self.seed,
                rank=self.rank, world=self.world, drop_last=self.drop_last, **kwargs)
            self._resume = None
            self._loader_pid = pid
            self._loader_share = workers
        return self._loader

    def _convert(self, batch):
        labels = torch.frombuffer(batch.labels, dtype=torch.int64)
        if self.transform is None:
            sizes = batch.sizes
            n = len(sizes)
            if self.collate is not False and n > 0 and min(sizes) == max(sizes):
                samples = torch.empty((n, sizes[0]), dtype=torch.uint8)
                if sizes[0] > 0:
                    batch.copy_into(samples.numpy())
            else:
                samples = _as_tensors(batch)
        else:
            out = [self.transform(t) for t in _as_tensors(batch)]
            if (self.collate is not False and out and
                    all(isinstance(x, torch.Tensor) for x in out) and
                    all(x.shape == out[0].shape for x in out)):
                samples = torch.stack(out)
            else:
                samples = out
        if self.with_indices:
            indices = torch.frombuffer(batch.indices, dtype=torch.int64)
            return samples, labels, indices
        return samples, labels

    def __iter__(self):
        info = get_worker_info()
        workers = info.num_workers if info is not None else 1
        worker = info.id if info is not None else 0
        loader = self._get_loader(workers)
        if self._epoch is not None:
            loader.set_epoch(self._epoch)
            self._epoch = None
        return self._iterate(loader, workers, worker)

    def _iterate(self, loader, workers, worker):
        for i, batch in enumerate(loader):
            if i % workers != worker:
                batch.release()
                continue
            item = self._convert(batch)
            del batch
            yield item
