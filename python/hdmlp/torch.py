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

Samples with fields (Dataset.field_records: image + caption + JSON + arrays ...): each item
is a dict by field name, the label under its field's name ("__index__": the indices with
with_indices=True). collate_fields(samples, fields) makes it from the batch's samples, each
a dict hdmlp.sample_fields gives (or what transform makes of one); the default,
hdmlp.torch.collate_fields, gives scalars as int64/float32/float64 tensors (a list with
None where absent), text as str, JSON parsed, ndarrays of a fixed shape stacked (else a
list of tensors), bytes and images as uint8 tensors (zero-copy views without workers).
With a transform and no collate_fields: torch's default_collate of what transform returns.
With image=hdmlp.ImagePipeline(...) the pipeline decodes the image field (ImagePipeline's
`field`, default the one image field): the dict holds the images tensor under its name and
the other fields collated as above.

Images: with image=hdmlp.ImagePipeline(...) the loader decodes and augments each sample
on its own C threads and each item is (images, labels): one (n, H, W, C) uint8 tensor (or
the pipeline's layout and dtype) viewing the batch's memory without a copy (num_workers=0),
or one shared-memory tensor per batch with workers (one copy, in C without the GIL, then
passed by descriptor). transform and collate do not apply.

Ranks: rank/world default to torch.distributed (when initialised), else the RANK and
WORLD_SIZE (or OMPI_COMM_WORLD_RANK/SIZE) environment variables, else 0 of 1. With
world > 1 the ranks exchange samples over gRPC: the constructor (a collective call: every
rank must construct the dataset) picks a free port on `host` (default: the interface that
reaches MASTER_ADDR, else 127.0.0.1) and gathers all ranks' endpoints, seeds and a job
token with torch.distributed (all_gather_object; seeds must agree). Without
torch.distributed, give peers= (a list of 'host:port' in rank order) yourself. Each rank
has one loader whatever its DataLoader workers (see below), so one endpoint per rank. A
rank serves its peers until they are done, so: pass epochs= (after the last one each rank
tells its peers it is finished; closing a loader of unbounded epochs waits up to 30 s for
quiet peers), keep ranks in step (DDP does), and don't iterate the main process's loader
(num_workers=0) before forking DataLoader workers (gRPC initialised before fork() is not
safe in the children).

Epochs: every iteration delivers one epoch. set_epoch(e) fixes the epoch of the next
iteration; without it, the next iteration delivers the next epoch (with workers, the data
plane keeps the loader across DataLoader iterations, persistent or not). With workers,
persistent or not and whatever their start method, the DataLoader yields exactly what
num_workers=0 yields for any sequence of set_epoch calls (repeats and earlier epochs
included): set_epoch writes to a small shared-memory record the dataset's copies in the
workers read when an iteration starts. Reaching an earlier epoch recreates the loader and
drains up to it (libhdmlp cannot start at an epoch yet). With epochs=N, set_epoch(N) and
an iteration past epoch N - 1 raise hdmlp.StateError (an empty epoch would go unnoticed).

DataLoader workers (num_workers = W > 0): one loader per rank, not per worker. The first
worker to iterate starts the rank's data plane, a process running the rank's only loader
with the same `memory` as num_workers=0 (so the same order); it copies each batch into a
shared-memory arena and hands batch i of the epoch to worker i mod W, the order DataLoader takes them in. So the DataLoader
yields exactly the sequence of num_workers=0, every sample is read and decompressed once
per rank per epoch whatever W, and workers get zero-copy hdmlp.Batch views of the arena.
The arena holds W + 2 batches of the largest samples (W workers each work on one while the
next is made), on top of `memory`: memory is the loader's, as without workers, and the
arena is what W workers hold at once (stats()['plane_arena_bytes']).
What a worker yields crosses to the main process as one shared-memory tensor per batch
(lists of sample tensors are packed and rebuilt as views), not one per sample. The plane
lives as long as the main process's dataset object, across epochs and non-persistent
workers; without set_epoch each new iteration delivers the next epoch. ds.stats() gives
its loader's stats. A worker that dies ends the epoch with an error naming it in the other
workers; the plane dying makes the workers raise PlaneError. When the training process dies
(even by SIGKILL), its workers and the plane exit within a second or so: each worker
watches the training process (a pidfd, on a thread of its own that needs no GIL), and so
does the plane.

Exact resume: ds.state_dict() after some batches gives a small picklable dict (the
position after the last batch the DataLoader yielded, the epoch the next iteration delivers
(the rest of) as 'epoch', and a pending set_epoch as 'set_epoch'); a new
process makes the same dataset (same data, seed, batch_size, memory, drop_last,
rank/world) and calls ds.load_state_dict(state) before iterating; the next iteration
delivers the rest of the saved epoch, then the following epochs, exactly as an
uninterrupted run would (with world > 1 every rank saves after the same number of batches
and every rank resumes). With num_workers > 0 the main process must know how many batches
the DataLoader yielded (workers prefetch ahead): iterate with hdmlp.torch.DataLoader, a
drop-in torch DataLoader that counts them (its state_dict()/load_state_dict() are the
dataset's); with a plain DataLoader and workers, state_dict() raises hdmlp.StateError.
A state from another dataset or configuration raises hdmlp.InvalidArgumentError (a
ValueError) naming the field.
"""
import difflib
import math
import mmap
import multiprocessing
import os
import random
import socket
import struct
import time
import weakref

import torch
import torch.utils.data
from torch.utils.data import IterableDataset, get_worker_info

import hdmlp
from hdmlp import _hdmlp, _plane

__all__ = ["HdmlpIterableDataset", "DataLoader", "collate_fields", "rank_and_world"]

_REQUIRED = object()  # a required argument not given (checked after unknown keywords)


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


def _bound_port(host):
    """A socket bound to a free port of host (the caller closes it): below the kernel's
    ephemeral range when one is free there, so that no outgoing connection of this host (the
    process group's, say) takes the port between its release and the loader's listen."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 0
    base = max(10000, low - 12000)
    for _ in range(64 if low > base else 0):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind((host, random.randrange(base, low)))
            return s
        except OSError:
            s.close()
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((host, 0))
    return s


def _gather_peers(rank, world, slots, seed, host):
    """[endpoints of every rank for worker slot w] for w < slots, and a job token, gathered
    with torch.distributed (collective)."""
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()):
        raise ValueError(f"world {world} > 1 needs peers=[...] or an initialised "
                         "torch.distributed process group to gather the ranks' endpoints")
    host = host or _local_host()
    # Each port stays bound until every rank has gathered: ranks of one host picking at
    # the same time then never get the same one (a freed port is the kernel's next pick).
    held = [_bound_port(host) for _ in range(slots)]
    try:
        mine = {"endpoints": [f"{host}:{s.getsockname()[1]}" for s in held], "seed": seed,
                "token": random.getrandbits(63)}
        everyone = [None] * world
        dist.all_gather_object(everyone, mine)
    finally:
        for s in held:
            s.close()
    seeds = {e["seed"] for e in everyone}
    if len(seeds) != 1:
        raise ValueError(f"seed: every rank must use the same seed, got {sorted(seeds)}")
    peers = [[everyone[r]["endpoints"][w] for r in range(world)] for w in range(slots)]
    return peers, everyone[0]["token"]


def _shutdown_plane(name, main_pid):
    if os.getpid() == main_pid:  # not from a forked worker's copy
        _plane.request(name, {"op": "shutdown"})
        _plane.forget_arena(name)


def _plane_finalizer(ds):
    """Stops the dataset's data plane when the dataset object goes (the plane also stops
    by itself when the main process exits)."""
    f = weakref.finalize(ds, _shutdown_plane, ds._plane_name(), ds._main_pid)
    f.atexit = False
    return f


class _EpochRequest:
    """set_epoch's request, shared between the dataset object and its copies in DataLoader
    workers: three int64 in a memfd (forked workers inherit the mapping; spawned and
    forkserver ones get the descriptor with the pickle). [0] requests made, [1] the last
    one taken (by the iteration it applied to), [2] its epoch. The main process writes a
    request before the DataLoader iteration that takes it starts, and the worker whose join
    opened the plane's session marks it taken, so every worker and the main process see
    the same pending request."""

    SIZE = 24

    def __init__(self, fd=None, values=(0, 0, 0)):
        if fd is None:
            fd = os.memfd_create("hdmlp-set-epoch", os.MFD_CLOEXEC)
            os.ftruncate(fd, self.SIZE)
            self._mm = mmap.mmap(fd, self.SIZE)
            struct.pack_into("<3q", self._mm, 0, *values)
        else:
            self._mm = mmap.mmap(fd, self.SIZE)
        self._fd = fd
        weakref.finalize(self, os.close, fd)

    def _get(self, i):
        return struct.unpack_from("<q", self._mm, 8 * i)[0]

    def _set(self, i, v):
        struct.pack_into("<q", self._mm, 8 * i, v)

    def request(self, epoch):
        self._set(2, epoch)
        self._set(0, self._get(0) + 1)

    def cancel(self):
        self._set(1, self._get(0))

    def pending(self):
        """(request number, epoch) of the request not taken yet, or None."""
        made = self._get(0)
        return (made, self._get(2)) if made > self._get(1) else None

    def take(self, seq):
        if seq > self._get(1):
            self._set(1, seq)

    def __reduce__(self):
        from multiprocessing import context, reduction
        if context.get_spawning_popen() is not None:  # to a DataLoader worker: shared
            return (_attach_epoch_request, (reduction.DupFd(self._fd),))
        return (_EpochRequest, (None, tuple(self._get(i) for i in range(3))))  # a copy


def _attach_epoch_request(dupfd):
    return _EpochRequest(dupfd.detach())


_watching = None  # the pid of the worker process whose training process is watched


def _exit_with_training_process():
    """In a DataLoader worker: end this process as soon as the process that started it (the
    training process) is gone, even by SIGKILL. torch's own watchdog runs only between
    batches and cannot end a worker whose queue thread is blocked on a full pipe another
    worker holds open; a pidfd watched by a C thread (no GIL needed) can, with every start
    method (multiprocessing.parent_process() is the training process for fork, spawn and
    forkserver alike)."""
    global _watching
    if _watching == os.getpid():
        return
    _watching = os.getpid()
    parent = multiprocessing.parent_process()
    if parent is None or parent.pid is None:
        return
    try:
        fd = os.pidfd_open(parent.pid)
    except ProcessLookupError:
        os._exit(1)  # already gone
    except (OSError, AttributeError):  # a kernel before 5.3: torch's watchdog only
        return
    _hdmlp._exit_when_readable(fd, 1)


def _as_tensors(batch):
    """uint8 tensors viewing each sample of the batch (zero-copy)."""
    return [_tensor_of(view) for view in batch.views(writable=True)]


_SCALAR_DTYPES = {"int64": torch.int64, "float32": torch.float32, "float64": torch.float64}


def _tensor_of(value):
    """A uint8 tensor viewing a stored value (a memoryview), or a tensor of an array."""
    if not isinstance(value, memoryview):
        return torch.from_numpy(value)
    if len(value) == 0:
        return torch.empty(0, dtype=torch.uint8)
    if value.readonly:
        return torch.frombuffer(bytearray(value), dtype=torch.uint8)
    return torch.frombuffer(value, dtype=torch.uint8)


def collate_fields(samples, fields):
    """The default collation of a batch of samples with fields (`samples`: one dict by field
    name a sample, as hdmlp.sample_fields gives; `fields`: Dataset.fields) into one dict by
    field name: scalars (the label too) a tensor of their type, or a list when some are
    absent (None); text a list of str; JSON a list of parsed values; ndarrays of a fixed
    shape, all present, one stacked tensor (n, *shape), else a list of tensors (None where
    absent); bytes and images a list of uint8 tensors viewing the values."""
    import json
    out = {}
    for field in fields:
        name, kind = field["name"], field["type"]
        values = [s[name] for s in samples]
        present = all(v is not None for v in values)
        if kind in _SCALAR_DTYPES:
            out[name] = torch.tensor(values, dtype=_SCALAR_DTYPES[kind]) if present else values
        elif kind == "text":
            out[name] = [None if v is None else str(v, "utf-8") for v in values]
        elif kind == "json":
            out[name] = [None if v is None else json.loads(str(v, "utf-8")) for v in values]
        elif kind == "ndarray":
            tensors = [None if v is None else _tensor_of(v) for v in values]
            fixed = None not in field["shape"]
            out[name] = torch.stack(tensors) if fixed and present and tensors else tensors
        else:
            out[name] = [None if v is None else _tensor_of(v) for v in values]
    return out


class HdmlpIterableDataset(IterableDataset):
    """IterableDataset yielding one batch per item from an hdmlp Loader (see module doc).

    dataset: path of a packed dataset (or an hdmlp.Dataset). batch_size, memory (int bytes
    or '1G', '25%'), seed, drop_last and **loader_kwargs (threads, refill, policy, engine,
    order, pool_reads, lookahead, direct_io, storage_cost, remote_memory, prefetch,
    peer_timeout, tls) go to hdmlp.Loader. memory is the rank's loader budget, with or without DataLoader workers
    (workers share one loader; their shared arena comes on top, see the module doc).
    collate: 'auto' | True | False. num_workers, peers, host: for world > 1 (module doc).
    image: an hdmlp.ImagePipeline; items are then (images tensor, labels) (module doc).
    """

    # hdmlp.Loader's keywords this class sets itself (or, for state, load_state_dict does)
    _OWN_LOADER_KEYWORDS = ("dataset", "batch_size", "memory", "seed", "rank", "world",
                            "drop_last", "peers", "image", "state")
    _KEYWORDS = ("dataset", "batch_size", "memory", "seed", "transform", "collate",
                 "with_indices", "rank", "world", "drop_last", "num_workers", "peers", "host",
                 "image")

    def __init__(self, dataset, batch_size=_REQUIRED, memory=_REQUIRED, *, seed=0,
                 transform=None, collate="auto", with_indices=False, rank=None, world=None,
                 drop_last=False, num_workers=0, peers=None, host=None, image=None,
                 collate_fields=None, **loader_kwargs):
        super().__init__()
        self._check_keywords(loader_kwargs)
        for name, value in (("batch_size", batch_size), ("memory", memory)):
            if value is _REQUIRED:
                raise TypeError(f"HdmlpIterableDataset() missing required argument {name!r}")
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
        # As given: a share ('25%') below the least the loader needs is raised to it (with a
        # warning), a budget in bytes is a ceiling; the loader decides, from this.
        self._memory_arg = memory if isinstance(memory, str) else self.memory
        self.seed = 0 if seed is None else seed
        self.transform = transform
        self.collate = collate
        self.with_indices = with_indices
        self.drop_last = drop_last
        self.loader_kwargs = dict(loader_kwargs)
        if image is not None and not isinstance(image, hdmlp.ImagePipeline):
            raise TypeError(f"image: expected an hdmlp.ImagePipeline, got "
                            f"{type(image).__name__}")
        self.image = image
        if collate_fields is not None and not callable(collate_fields):
            raise TypeError(f"collate_fields: expected a callable, got "
                            f"{type(collate_fields).__name__}")
        self.collate_fields = collate_fields
        self.fields = self._dataset.fields if self._dataset.field_records else None
        self.classes = self._dataset.classes
        self.num_workers = num_workers
        self._peers = None  # every rank's endpoint (world > 1)
        if self.world > 1 and peers is not None:
            peers = list(peers)
            if peers and not isinstance(peers[0], str):  # one list per worker: older API
                peers = list(peers[0])
            self._peers = peers
        # Every argument hdmlp.Loader takes is checked now, as Loader() would (the budget's
        # minimum excepted), not at the first iteration inside a DataLoader worker, and
        # before the ranks gather their endpoints.
        hdmlp.Loader._check(self._dataset, batch_size, self._memory_arg, seed=self.seed,
                            rank=self.rank, world=self.world, drop_last=drop_last,
                            image=image, peers=self._peers, **self.loader_kwargs)
        if self.world > 1 and self._peers is None:
            self._peers, token = _gather_peers(self.rank, self.world, 1, self.seed, host)
            self._peers = self._peers[0]
            self.loader_kwargs.setdefault("job_token", token)
        self._epoch_request = _EpochRequest()  # set_epoch's, taken by the next iteration
        self._loader = None     # per process
        self._loader_pid = None
        self._loader_share = None
        self._resume = None     # Loader state for the next loader made (load_state_dict)
        # the rank's data plane (DataLoader workers): named after this object in the main
        # process; a new generation after load_state_dict
        self._main_pid = os.getpid()
        self._plane_token = f"{random.getrandbits(64):016x}"
        self._plane_gen = 0
        self._client = None
        self._client_pid = None
        self._yielded = None    # batches hdmlp.torch.DataLoader yielded in its iteration
        self._iteration_token = None  # hdmlp.torch.DataLoader's, per iterator it makes
        self._finalizer = _plane_finalizer(self)

    @classmethod
    def _check_keywords(cls, loader_kwargs):
        """TypeError naming a keyword neither this class nor hdmlp.Loader takes."""
        allowed = set(hdmlp.Loader._keywords) - set(cls._OWN_LOADER_KEYWORDS)
        for key in loader_kwargs:
            if key == "state":
                raise TypeError("HdmlpIterableDataset() got an unexpected keyword argument "
                                "'state': resume with load_state_dict(state)")
            if key not in allowed:
                close = difflib.get_close_matches(key, sorted(allowed | set(cls._KEYWORDS)), 1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise TypeError(f"HdmlpIterableDataset() got an unexpected keyword argument "
                                f"{key!r}{hint}")

    # -- epochs and length -------------------------------------------------------------
    def set_epoch(self, epoch):
        """The next iteration delivers epoch `epoch` (0-based), with or without DataLoader
        workers (persistent ones included)."""
        if isinstance(epoch, bool) or not isinstance(epoch, int):
            raise TypeError(f"epoch: expected an int, got {type(epoch).__name__}")
        epochs = self.loader_kwargs.get("epochs")
        if epoch < 0 or (epochs is not None and epoch >= epochs):
            limit = f"0..{epochs - 1} (epochs={epochs})" if epochs is not None else ">= 0"
            raise hdmlp.InvalidArgumentError(f"epoch: expected {limit}, got {epoch}")
        self._epoch_request.request(int(epoch))

    def _pending_epoch(self):
        """The epoch set_epoch asked for and no iteration has taken yet, or None."""
        pending = self._epoch_request.pending()
        return None if pending is None else pending[1]

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
        """Picklable position after the last batch the DataLoader yielded: {'format',
        'version', 'loader': hdmlp.Loader.state_dict(), 'epoch', 'set_epoch'}: 'epoch' is
        the epoch the next iteration after load_state_dict delivers (the rest of), which is
        the pending set_epoch if any, else the loader's, or the next one when the saved
        epoch was complete (so `for epoch in range(sd['epoch'], epochs)` resumes, and after
        the last epoch runs nothing); 'set_epoch' is the pending set_epoch or None. With num_workers > 0 it needs hdmlp.torch.DataLoader (which
        counts the yielded batches). Raises hdmlp.StateError when there is no position to
        save."""
        def wrap(loader_state):
            pending = self._pending_epoch()
            epoch = loader_state["epoch"]
            if pending is not None:
                epoch = pending
            elif loader_state["batch"] >= len(self):  # saved after an epoch's last batch
                epoch += 1
            return {"format": self.STATE_FORMAT, "version": self.STATE_VERSION,
                    "loader": loader_state, "epoch": epoch, "set_epoch": pending}
        loader = self._loader if self._loader_pid == os.getpid() else None
        if loader is not None and (self._yielded is None or self._yielded[0] == 0):
            return wrap(loader.state_dict())
        if self._yielded is not None and self._yielded[0] > 0:  # workers, counted
            answer = _plane.request(self._plane_name(), {"op": "state",
                                                         "yielded": self._yielded[1]})
            if answer is not None and answer["state"] is not None:
                return wrap(_plane._decode_state(answer["state"]))
        if self._resume is not None:  # loaded, not used yet: the same position
            return wrap(self._resume)
        if self._yielded is None and self._client_pid is None:
            raise hdmlp.StateError(
                "state_dict: no position to save: iterate first (with num_workers > 0, "
                "through hdmlp.torch.DataLoader, which counts the batches the DataLoader "
                "yielded; a plain DataLoader's workers read ahead of what it yielded)")
        raise hdmlp.StateError("state_dict: no batch has been yielded yet")

    def load_state_dict(self, state):
        """Resume from state_dict()'s dict: the next iteration continues the saved epoch.
        Call before iterating. Another dataset or configuration raises
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
        # a running data plane serves the old position: the next one starts from the state
        self._finalizer()
        self._plane_gen += 1
        self._finalizer = _plane_finalizer(self)
        self._resume = dict(state["loader"])
        # 'set_epoch' is the pending request; states saved before it existed kept it in
        # 'epoch'
        epoch = state["set_epoch"] if "set_epoch" in state else state.get("epoch")
        if epoch is None:
            self._epoch_request.cancel()
        else:
            self._epoch_request.request(int(epoch))

    def stats(self):
        """Stats (hdmlp.Loader.stats()) of this rank's loader: the data plane's with
        DataLoader workers, else the one in this process; None before the first iteration."""
        if self._loader is not None and self._loader_pid == os.getpid():
            return self._loader.stats()
        answer = _plane.request(self._plane_name(), {"op": "stats"})
        return None if answer is None else answer["stats"]

    def _plane_name(self):
        return f"hdmlp-plane-{self._main_pid}-{self._plane_token}-{self._plane_gen}"

    def _plane_spec(self, workers):
        kwargs = dict(self.loader_kwargs)
        if self._peers is not None:
            kwargs["peers"] = self._peers
        if self.image is not None:  # JSON: the plane rebuilds it (_plane.Plane.serve)
            kwargs["image"] = dict(vars(self.image))
        # Each worker holds the batch it works on while the next is made: W + 1 records
        # (+ headers, + the end of the arena a record does not fit into) never block.
        if self.image is not None:
            largest = self.batch_size * self.image.image_bytes + 64 * self.batch_size
            if self.fields is not None:  # each image's field record beside it
                largest += self._dataset.largest_batch_bytes(self.batch_size) + \
                    72 * self.batch_size + 128
        else:
            largest = self._dataset.largest_batch_bytes(self.batch_size) + 64 * self.batch_size
        arena = int(math.ceil((workers + 2) * largest / 4096)) * 4096
        return {"name": self._plane_name(), "path": self.path, "batch_size": self.batch_size,
                "memory": self._memory_arg, "arena": arena, "workers": workers, "seed": self.seed, "rank": self.rank,
                "world": self.world, "drop_last": self.drop_last, "loader_kwargs": kwargs,
                "state": _plane._encode_state(self._resume), "main_pid": self._main_pid}

    # -- pickling (spawned DataLoader workers): open handles are per process -----------
    def __getstate__(self):
        state = self.__dict__.copy()
        state["_dataset"] = None
        state["_loader"] = None
        state["_loader_pid"] = None
        state["_client"] = None
        state["_client_pid"] = None
        state["_finalizer"] = None  # the main process's object shuts the plane down
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._dataset = hdmlp.Dataset(self.path)

    # -- iteration ---------------------------------------------------------------------
    def _get_loader(self):
        pid = os.getpid()
        if self._loader is not None and self._loader_pid != pid:
            # Inherited through fork (its threads do not exist here; the object knows and
            # will not free the C loader).
            self._loader = None
        if self._loader is None:
            kwargs = dict(self.loader_kwargs)
            if self._peers is not None:
                kwargs["peers"] = self._peers
            if self._resume is not None:
                kwargs["state"] = self._resume
            if self.image is not None:
                kwargs["image"] = self.image
            self._loader = hdmlp.Loader(
                self._dataset, self.batch_size, self._memory_arg, seed=self.seed,
                rank=self.rank, world=self.world, drop_last=self.drop_last, **kwargs)
            self._resume = None
            self._loader_pid = pid
        return self._loader

    def _plane_client(self, workers):
        if self._client is None or self._client_pid != os.getpid():
            self._client = _plane.Client(self._plane_name(), self._plane_spec(workers))
            self._client_pid = os.getpid()
        return self._client

    def _images(self, batch, shared):
        """The batch's decoded images as one tensor: a view of the batch's memory, or (to
        cross a worker queue) a copy in a shared-memory tensor."""
        if not shared:
            return torch.from_numpy(batch.images)
        dtype = torch.float32 if self.image.dtype == "float32" else torch.uint8
        out = torch.empty((len(batch),) + self.image.shape, dtype=dtype)
        if out.numel() * out.element_size() > BY_VALUE_MAX:
            out.share_memory_()
        if len(batch):
            batch.copy_into(out.numpy())
        return out

    def _image_field(self):
        """The field the image pipeline decodes (ImagePipeline.field, or the one image)."""
        if self.image.field is not None:
            return self.image.field
        return next(f["name"] for f in self.fields if f["type"] == "image")

    def _convert_fields(self, batch, images=None):
        fields = self.fields
        if images is None:
            records = batch.views(writable=True)
        else:  # the decoded field comes as images; the others from the records
            decoded = self._image_field()
            fields = [f for f in fields if f["name"] != decoded]
            records = batch.records
        samples = [hdmlp.sample_fields(v, self.fields) for v in records]
        if images is not None:
            for s in samples:
                del s[decoded]
        if self.transform is not None:
            samples = [self.transform(s) for s in samples]
        if self.collate_fields is not None:
            item = self.collate_fields(samples)
        elif self.transform is not None:
            item = torch.utils.data.default_collate(samples) if self.collate is not False \
                else samples
        else:
            item = collate_fields(samples, fields)
        if images is not None and isinstance(item, dict):
            item[decoded] = images
        if self.with_indices and isinstance(item, dict):
            item["__index__"] = torch.frombuffer(batch.indices, dtype=torch.int64).clone() \
                if len(batch) else torch.empty(0, dtype=torch.int64)
        return item

    def _convert(self, batch, shared=False):
        if self.fields is not None:
            images = None if self.image is None else self._images(batch, shared)
            return self._convert_fields(batch, images)
        labels = torch.frombuffer(batch.labels, dtype=torch.int64)
        if self.image is not None:
            samples = self._images(batch, shared)
        elif self.transform is None:
            sizes = batch.sizes
            n = len(sizes)
            if self.collate is not False and n > 0 and min(sizes) == max(sizes):
                samples = _queue_tensor((n, sizes[0]), shared)
                if sizes[0] > 0:
                    batch.copy_into(samples.numpy())
            elif shared:  # one tensor, rebuilt as per-sample views by the receiver
                flat = _queue_tensor((sum(sizes),), shared)
                if len(flat):
                    batch.copy_into(flat.numpy())
                samples = _Ragged(flat, list(sizes))
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
        if info is None:
            loader = self._get_loader()
            pending = self._epoch_request.pending()
            if pending is not None:
                loader.set_epoch(pending[1])
                self._epoch_request.take(pending[0])
            return self._iterate(loader)
        _exit_with_training_process()
        return self._iterate_workers(self._plane_client(info.num_workers), info,
                                     self._epoch_request.pending())

    def _iterate(self, loader):
        for batch in loader:
            item = self._convert(batch)
            del batch
            yield item

    def _iterate_workers(self, client, info, request):
        # request: set_epoch's pending (number, epoch), marked taken when this worker's
        # join opens the plane's session for this iteration
        args = (info.id, info.num_workers, request, self._epoch_request.take,
                self._iteration_token, info.seed - info.id)
        if self.fields is not None and self.image is None:
            # Fields: collated here; what crosses the queue is made of few tensors (views
            # of the batch's memory are copied: the batch is released after this item).
            for batch in client.iterate(*args):
                item = _detached(self._convert(batch, shared=True))
                del batch
                yield item
            return
        if self.transform is None and self.image is None:
            # Raw bytes: the batch stays in the plane's arena and crosses the worker queue
            # as its place; the training process copies it out (_from_plane).
            for offset, seq in client.iterate(*args, take=False):
                yield _InPlane(self._plane_name(), offset, seq, self.collate,
                               self.with_indices)
            return
        for batch in client.iterate(*args):
            item = self._convert(batch, shared=True)
            del batch
            if isinstance(item, dict):  # fields beside decoded images
                yield _detached(item)
                continue
            yield tuple(_Packed(x) if isinstance(x, list) else
                        _ByValue(x) if isinstance(x, torch.Tensor) and not x.is_shared() else x
                        for x in item)


# What a DataLoader worker yields crosses to the main process through torch's queue, which
# sends each tensor's storage as a shared-memory segment and a file descriptor (a socket
# round trip per descriptor), or, for what is not a tensor, by value in the pickle. Per
# transformed batch: one shared tensor for the samples when they are large, and everything
# by value when the batch is small. Raw-byte batches cross by place instead (_InPlane).
BY_VALUE_MAX = 1 << 20


def _detached(item):
    """An item of a worker's batch made to cross the worker queue: tensors viewing the
    batch's memory copied (the plane's record is released after it), lists of tensors
    packed as one (_Packed), small tensors by value; dicts, lists and tuples through."""
    if isinstance(item, torch.Tensor) and item.is_shared():
        return item  # made for the queue (the decoded images)
    if isinstance(item, torch.Tensor):
        return _ByValue(item.clone()) if item.numel() * item.element_size() <= BY_VALUE_MAX \
            else item.clone().share_memory_()
    if isinstance(item, dict):
        return {k: _detached(v) for k, v in item.items()}
    if isinstance(item, (list, tuple)):
        out = [_detached(v) for v in item]
        if isinstance(item, list) and out and all(isinstance(v, _ByValue) for v in out):
            return _Packed(v.t for v in out)
        return out if isinstance(item, list) else tuple(out)
    return item


def _queue_tensor(shape, shared):
    t = torch.empty(shape, dtype=torch.uint8)
    if shared and t.numel() > BY_VALUE_MAX:
        t.share_memory_()
    return t


def _from_bytes(data, dtype, shape):
    if not data:
        return torch.empty(shape, dtype=getattr(torch, dtype))
    return torch.frombuffer(bytearray(data), dtype=getattr(torch, dtype)).view(shape)


def _tensor_reduce(t):
    if t.is_shared() or t.numel() * t.element_size() > BY_VALUE_MAX:
        return t
    return (_from_bytes, (t.contiguous().numpy().tobytes(), str(t.dtype).split(".")[1],
                          tuple(t.shape)))


class _ByValue:
    """A small tensor that crosses the worker queue inside the pickle."""

    def __init__(self, t):
        self.t = t

    def __reduce__(self):
        r = _tensor_reduce(self.t)
        return (_identity, (r,)) if isinstance(r, torch.Tensor) else r


def _identity(x):
    return x


class _Packed(list):
    """A list of tensors that crosses a DataLoader worker queue as one tensor: torch sends
    every tensor through its own shared-memory segment and file descriptor, which costs
    far more than the bytes of small samples. Rebuilt as views in the receiving process."""

    def __reduce__(self):
        if not self or not all(isinstance(t, torch.Tensor) and t.device.type == "cpu"
                               for t in self) or len({t.dtype for t in self}) != 1:
            return (list, (list(self),))
        flat = torch.cat([t.reshape(-1) for t in self])
        return (_unpack, (_ByValue(flat), [tuple(t.shape) for t in self]))


def _unpack(flat, shapes):
    if all(len(shape) == 1 for shape in shapes):
        return list(torch.split(flat, [shape[0] for shape in shapes]))
    out, at = [], 0
    for shape in shapes:
        n = math.prod(shape)
        out.append(flat[at:at + n].view(shape))
        at += n
    return out


class _InPlane:
    """A raw-byte batch a DataLoader worker leaves in the data plane's arena: it crosses the
    worker queue as its place (a few bytes in the pickle, no tensor, no shared-memory
    segment) and becomes, in the process that receives it, what num_workers=0 gives: the
    samples copied out of the arena once, then the record released."""

    def __init__(self, name, offset, seq, collate, with_indices):
        self.args = (name, offset, seq, collate, with_indices)

    def __reduce__(self):
        return (_from_plane, self.args)


def _from_plane(name, offset, seq, collate, with_indices):
    mm = _plane.main_arena(name)
    if not _hdmlp._ring_claim(mm, offset, seq):
        raise _plane.PlaneError(f"data plane {name}: batch record {seq} was freed before the "
                                "training process took it (its DataLoader worker exited?)")
    batch = _hdmlp._ring_take(mm, offset, seq)

    def ints(buf):  # a copy: the record is released below
        return torch.frombuffer(buf, dtype=torch.int64).clone() if len(buf) else \
            torch.empty(0, dtype=torch.int64)
    try:
        labels = ints(batch.labels)
        sizes = list(batch.sizes)
        n = len(sizes)
        if collate is not False and n > 0 and min(sizes) == max(sizes):
            samples = torch.empty((n, sizes[0]), dtype=torch.uint8)
        else:
            samples = torch.empty((sum(sizes),), dtype=torch.uint8)
        if samples.numel():
            batch.copy_into(samples.numpy())
        if samples.dim() == 1:  # ragged: views of the one tensor, as without workers
            samples = list(torch.split(samples, sizes)) if n else []
        out = (samples, labels)
        if with_indices:
            out += (ints(batch.indices),)
    finally:
        batch.release()
    return out


class _Ragged:
    """Samples of different sizes, back to back in one shared tensor (a DataLoader worker's
    batch without a transform): arrives in the main process as the list of uint8 tensors
    num_workers=0 gives, views of that one tensor. Not a sequence, so DataLoader's
    default_convert passes it through untouched."""

    def __init__(self, flat, sizes):
        self.flat, self.sizes = flat, sizes

    def __reduce__(self):
        return (_unpack, (_ByValue(self.flat), [(n,) for n in self.sizes]))


_UNSET = object()


class DataLoader(torch.utils.data.DataLoader):
    """torch.utils.data.DataLoader that counts the batches it yields, so that an
    HdmlpIterableDataset's state_dict() is the position training reached even when
    workers prefetch ahead. Same arguments; state_dict()/load_state_dict() are the
    dataset's. stall_seconds: time the training loop spent waiting in next() (this rank's
    stall, the number to compare across local ranks); batches_yielded: over all epochs."""

    stall_seconds = 0.0  # time the training loop waited for batches, over all iterations
    batches_yielded = 0

    def __init__(self, dataset, batch_size=_UNSET, *args, **kwargs):
        # An HdmlpIterableDataset yields whole batches: torch's default batch_size=1 would
        # silently add a dimension. None is the default here, and anything else an error.
        if isinstance(dataset, HdmlpIterableDataset):
            if batch_size is _UNSET:
                batch_size = None
            elif batch_size is not None:
                raise ValueError(
                    f"hdmlp.torch.DataLoader: batch_size={batch_size!r}, but the dataset "
                    f"already yields batches of {dataset.batch_size}; leave batch_size out "
                    "(or pass None) and set the batch size on HdmlpIterableDataset")
        elif batch_size is _UNSET:
            batch_size = 1  # torch's own default
        super().__init__(dataset, batch_size, *args, **kwargs)

    def __iter__(self):
        ds = self.dataset
        counted = isinstance(ds, HdmlpIterableDataset)
        if counted:  # forked into the workers: names this iteration for the data plane
            ds._iteration_token = random.getrandbits(62)
        it = super().__iter__()
        if counted:
            ds._yielded = [self.num_workers, 0]
        clock = time.perf_counter
        while True:
            t0 = clock()
            try:
                item = next(it)
            except StopIteration:
                return
            finally:
                self.stall_seconds += clock() - t0
            self.batches_yielded += 1
            if counted:
                ds._yielded[1] += 1
            yield item

    def state_dict(self):
        return self.dataset.state_dict()

    def load_state_dict(self, state):
        self.dataset.load_state_dict(state)
