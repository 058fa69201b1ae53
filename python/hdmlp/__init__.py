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

Images: with Loader(..., image=hdmlp.ImagePipeline(size=224)) the loader decodes and
augments (RandomResizedCrop + flip, or Resize + CenterCrop for mode='val') on its own C
threads; each batch's `images` is one (n, 224, 224, 3) uint8 numpy array, zero-copy:

    pipe = hdmlp.ImagePipeline(size=224, mode="train")
    for batch in hdmlp.Loader(ds, batch_size=256, memory="25%", image=pipe):
        x, y = batch.images, batch.labels

Objects
    Dataset(path)        open packed dataset: len, ds[i] -> bytes, info(i), classes, labels
    Loader(...)          batches of one epoch per iteration; stats(), set_epoch(e)
    Batch                len(batch), batch.samples (memoryviews), labels, indices, epoch,
                         images (with an ImagePipeline)
    ImagePipeline(...)   decode and augmentation on the loader's threads (Loader(image=))
    sample_fields(s, ds.fields)  a sample with fields as {name: value} (zero-copy)
    batch_fields(samples, ds.fields)  a batch's values by field name
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
from .pack import pack  # noqa: F401  (hdmlp-pack from Python)
from .fields import batch_fields, sample_fields  # noqa: F401  (field records, zero-copy)

__version__ = library_version

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class ImagePipeline:
    """Decode and augmentation on the loader's own threads (hdmlp_image_config in hdmlp.h).

    size: output side, or (height, width). mode: 'train' (torchvision's RandomResizedCrop
    with `scale` and `ratio`, then a horizontal flip with probability `flip`, default 0.5)
    or 'val' (resize the shorter side to size / crop_fraction, centre crop; flip default 0).
    layout: 'NHWC' (default) or 'NCHW'. dtype: 'uint8' (default) or 'float32', which is
    (value / 255 - mean) / std per channel (normalize=True uses ImageNet's mean and std).
    channels: 3 (RGB) or 1 (luma). threads: decode threads, 0 = automatic balance between
    I/O and decoding. prefetch: batches decoded ahead. dct_scaling: JPEG decoding at 1/2,
    1/4 or 1/8 when the crop is still at least twice the output (faster; a few levels off a
    full decode). fast_decode: JPEG decoding with the fast IDCT and upsampling (less CPU;
    off by default: its pixels differ from PIL's beyond that tolerance, a level or two on
    average and more at colour edges). field: on samples with fields, the field decoded
    (default: the dataset's one image field); the others come through as batch.records
    (field records, hdmlp.sample_fields). Every draw is seeded by (loader seed, epoch,
    sample): runs reproduce. A plain picklable value (DataLoader workers and the data plane receive it)."""

    def __init__(self, size=224, *, mode="train", scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3),
                 crop_fraction=0.875, flip=None, layout="NHWC", dtype="uint8",
                 normalize=False, mean=None, std=None, channels=3, threads=0, prefetch=2,
                 dct_scaling=True, fast_decode=False, field=None):
        if isinstance(size, int) and not isinstance(size, bool):
            size = (size, size)
        self.size = tuple(int(v) for v in size)
        self.mode = str(mode).lower()
        self.scale = tuple(float(v) for v in scale)
        self.ratio = tuple(float(v) for v in ratio)
        self.crop_fraction = float(crop_fraction)
        if flip is None:
            flip = 0.5 if self.mode == "train" else 0.0
        self.flip = float(flip)
        self.layout = str(layout).upper()
        self.dtype = str(dtype).lower()
        if normalize:
            mean = IMAGENET_MEAN if mean is None else mean
            std = IMAGENET_STD if std is None else std
        self.mean = None if mean is None else tuple(float(v) for v in mean)
        self.std = None if std is None else tuple(float(v) for v in std)
        self.channels = int(channels)
        self.threads = int(threads)
        self.prefetch = int(prefetch)
        self.dct_scaling = int(bool(dct_scaling))
        self.fast_decode = int(bool(fast_decode))
        self.field = None if field is None else str(field)
        _hdmlp._check_image(self)  # the library's range checks, naming the parameter

    @property
    def shape(self):
        """Shape of one output image: (H, W, C) or (C, H, W)."""
        h, w = self.size
        return (h, w, self.channels) if self.layout == "NHWC" else (self.channels, h, w)

    @property
    def image_bytes(self):
        """Bytes of one output image."""
        h, w = self.size
        return h * w * self.channels * (4 if self.dtype == "float32" else 1)

    def __repr__(self):
        keys = ("size", "mode", "scale", "ratio", "crop_fraction", "flip", "layout", "dtype",
                "mean", "std", "channels", "threads", "prefetch", "dct_scaling",
                "fast_decode", "field")
        return "hdmlp.ImagePipeline(%s)" % ", ".join(f"{k}={getattr(self, k)!r}"
                                                     for k in keys)

    def __eq__(self, other):
        return isinstance(other, ImagePipeline) and vars(self) == vars(other)

# HDMLP_OK, HDMLP_END and the HDMLP_E_* codes, without the prefix: hdmlp.E_CORRUPT, ...
for _name in dir(_hdmlp):
    if _name == "OK" or _name == "END" or _name.startswith("E_"):
        globals()[_name] = getattr(_hdmlp, _name)
del _name

__all__ = [
    "Batch", "CorruptDataError", "Dataset", "Error", "ExistsError", "FormatVersionError",
    "ImagePipeline", "IMAGENET_MEAN", "IMAGENET_STD",
    "Interrupted", "InvalidArgumentError", "Loader", "NotFoundError", "OutOfMemoryError",
    "PeerError", "STATE_MAX", "StateError", "StorageError", "TimedOutError", "UnsupportedError", "err_name",
    "pack", "parse_memory", "strerror",
]
