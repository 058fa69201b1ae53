"""hdmlp: chunked datasets and a batched random-access loader for training.

    import hdmlp
    ds = hdmlp.Dataset("train.hdmlp")              # packed with hdmlp-pack
    loader = hdmlp.Loader(ds, batch_size=256, memory="25%", seed=42)
    for epoch in range(10):
        for batch in loader:                         # one epoch per iteration
            images = [bytes(v) for v in batch.samples]   # zero-copy memoryviews
            labels = batch.labels                    # array('q')

Every sample is delivered exactly once per epoch, in a globally random order that depends
only on (dataset, seed, configuration), while the loader holds at most `memory` bytes.
`hdmlp.torch` wraps a loader as a PyTorch IterableDataset.

Objects
    Dataset(path)        open packed dataset: len, ds[i] -> bytes, info(i), classes, labels
    Loader(...)          batches of one epoch per iteration; stats(), set_epoch(e)
    Batch                len(batch), batch.samples (memoryviews), labels, indices, epoch
Errors (all derive from hdmlp.Error; `code`, `name`, `detail` attributes)
    CorruptDataError, FormatVersionError, StorageError (also OSError) with NotFoundError,
    ExistsError, PeerError; InvalidArgumentError (also ValueError), OutOfMemoryError (also
    MemoryError), UnsupportedError (also NotImplementedError), StateError (also
    RuntimeError), Interrupted (also InterruptedError), TimedOutError (also TimeoutError).
"""
from ._hdmlp import (  # noqa: F401
    Batch,
    CorruptDataError,
    Dataset,
    Error,
    ExistsError,
    FormatVersionError,
    Interrupted,
    InvalidArgumentError,
    Loader,
    NotFoundError,
    OutOfMemoryError,
    PeerError,
    STATE_MAX,
    StateError,
    StorageError,
    TimedOutError,
    UnsupportedError,
    err_name,
    library_version,
    parse_memory,
    strerror,
)
from . import _hdmlp

__version__ = library_version

# HDMLP_OK, HDMLP_END and the HDMLP_E_* codes, without the prefix: hdmlp.E_CORRUPT, ...
for _name in dir(_hdmlp):
    if _name == "OK" or _name == "END" or _name.startswith("E_"):
        globals()[_name] = getattr(_hdmlp, _name)
del _name

__all__ = [
    "Batch", "CorruptDataError", "Dataset", "Error", "ExistsError", "FormatVersionError",
    "Interrupted", "InvalidArgumentError", "Loader", "NotFoundError", "OutOfMemoryError",
    "PeerError", "STATE_MAX", "StateError", "StorageError", "TimedOutError", "UnsupportedError", "err_name",
    "parse_memory", "strerror",
]
