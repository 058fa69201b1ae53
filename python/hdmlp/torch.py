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
WORLD_SIZE (or OMPI_COMM_WORLD_RANK/SIZE) environment variables, else 0 of 1; every rank
must use the same seed. (world > 1 needs the cross-rank exchange of a later libhdmlp: until
then the loader raises hdmlp.UnsupportedError.)

Epochs: every iteration delivers one epoch. set_epoch(e) fixes the epoch of the next
iteration; without it, a process that keeps its loader (num_workers=0, or
persistent_workers=True) moves to the next epoch by itself. Non-persistent DataLoader
workers are new processes every epoch: call set_epoch(e) before each epoch, or every epoch
repeats epoch 0's order (DistributedSampler has the same rule). Reaching epoch e in a new
process reads and drops the e earlier epochs (libhdmlp cannot start at an epoch yet), so
prefer persistent_workers=True.

DataLoader workers (num_workers = W > 0): every worker runs its own loader over the rank's
whole sequence with memory/W bytes (and 1 I/O thread unless `threads` is given) and keeps
the batches whose position in the epoch is ≡ worker id (mod W), dropping the others
unread by Python. DataLoader takes one batch from each worker in turn, so it yields
exactly the sequence of a single loader with memory/W, each sample once per epoch; the
cost is that every worker reads (and decompresses) every chunk. Decoding/transforms, the
expensive part, is split W ways.
"""
import os

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
    lookahead, direct_io, storage_cost) go to hdmlp.Loader. memory is this rank's total: with
    W DataLoader workers each gets memory/W. collate: 'auto' | True | False.
    """

    def __init__(self, dataset, batch_size, memory, *, seed=0, transform=None, collate="auto",
                 with_indices=False, rank=None, world=None, drop_last=False, **loader_kwargs):
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
        self._epoch = None      # set by set_epoch, used once by the next iteration
        self._loader = None     # per process
        self._loader_pid = None
        self._loader_share = None

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
            if workers > 1 and "threads" not in kwargs:
                kwargs["threads"] = 1
            self._loader = hdmlp.Loader(
                self._dataset, self.batch_size, max(1, self.memory // workers), seed=self.seed,
                rank=self.rank, world=self.world, drop_last=self.drop_last, **kwargs)
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
