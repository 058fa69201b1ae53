"""Samples with fields: reading a field record (hdmlp.h, format/FORMAT.md) without copying.

A dataset whose only fields are one byte string and the label delivers each sample as that
value's bytes. Any other (`Dataset.field_records` is True) delivers each sample as a field
record; `sample_fields` turns one into a dict by field name:

    ds = hdmlp.Dataset("pairs.hdmlp")
    for batch in hdmlp.Loader(ds, batch_size=64, memory="25%"):
        for sample in batch.samples:
            f = hdmlp.sample_fields(sample, ds.fields)
            image, caption = f["jpg"], bytes(f["txt"]).decode()

Stored values (bytes, text, JSON, image) are memoryviews into the sample's buffer, valid
while the batch is; ndarray values are numpy arrays of the field's dtype and the value's
shape viewing the same buffer (numpy is needed for them); scalars are int (int64) or float
(float32, float64); an absent value is None. `batch_fields` gives a batch's values by field.
"""
import struct

_MAGIC = 0x46534448  # "HDSF"
_HEAD = struct.Struct("<II")
_ENTRY = struct.Struct("<QIBB2x")
_STORED, _INLINE = 1, 2
_INT64, _FLOAT32, _FLOAT64 = 3, 4, 5


def _ndarray(view, field):
    """An ndarray value (FORMAT.md: the sizes of the dims the field leaves open, as u64, then
    the elements in C order) as a numpy array viewing it."""
    import numpy as np  # ndarray fields need numpy
    shape, at = [], 0
    for dim in field["shape"]:
        if dim is None:
            if len(view) < at + 8:
                raise ValueError(f"field {field['name']!r}: an ndarray value of {len(view)} "
                                 "bytes, too short for its sizes")
            dim = int.from_bytes(view[at:at + 8], "little")
            at += 8
        shape.append(dim)
    dtype = np.dtype(field["dtype"]).newbyteorder("<")
    count = 1
    for dim in shape:
        count *= dim
    if len(view) - at != count * dtype.itemsize:
        raise ValueError(f"field {field['name']!r}: an ndarray of shape {tuple(shape)} in "
                         f"{len(view) - at} bytes")
    return np.frombuffer(view[at:], dtype=dtype).reshape(shape)


def sample_fields(sample, fields):
    """Dict {field name: value} of one field record (`sample`: a bytes-like object, such as a
    batch's sample memoryview; `fields`: the dataset's `Dataset.fields`). Raises ValueError
    when the bytes are not a field record of that many fields, or a value lies outside it."""
    view = memoryview(sample).cast("B")
    if len(view) < _HEAD.size:
        raise ValueError(f"not a field record ({len(view)} bytes)")
    magic, count = _HEAD.unpack_from(view, 0)
    if magic != _MAGIC or count != len(fields) or len(view) < _HEAD.size + _ENTRY.size * count:
        raise ValueError(
            f"not a field record of {len(fields)} fields ({len(view)} bytes, magic {magic:#x}, "
            f"{count} fields)"
        )
    out = {}
    for f, field in enumerate(fields):
        value, length, state, ftype = _ENTRY.unpack_from(view, _HEAD.size + _ENTRY.size * f)
        if state == _STORED:
            if value > len(view) or length > len(view) - value:
                raise ValueError(f"field {field['name']!r}: {length} bytes at {value}, past "
                                 f"the record's {len(view)}")
            out[field["name"]] = view[value:value + length]
            if field["type"] == "ndarray":
                out[field["name"]] = _ndarray(out[field["name"]], field)
        elif state == _INLINE:
            raw = value.to_bytes(8, "little")
            if ftype == _FLOAT32:
                out[field["name"]] = struct.unpack_from("<f", raw)[0]
            elif ftype == _FLOAT64:
                out[field["name"]] = struct.unpack_from("<d", raw)[0]
            else:
                out[field["name"]] = struct.unpack_from("<q", raw)[0]
        else:
            out[field["name"]] = None
    return out


def batch_fields(samples, fields, stack=False):
    """Dict {field name: one value a sample} of a batch's field records (`samples`: e.g.
    `batch.samples`, `batch.records` beside decoded images, or `batch.views(writable=True)`
    for writable buffers), each value as `sample_fields` gives it: variable-length values
    as a list of buffers. With stack=True (numpy needed), a field every sample has that is a
    scalar becomes one numpy array of its type, and an ndarray of a fixed shape one array
    (n, *shape) (a copy); the others stay lists. hdmlp.torch.collate_fields does the same
    for PyTorch, with text decoded and JSON parsed."""
    out = {field["name"]: [] for field in fields}
    for sample in samples:
        for name, value in sample_fields(sample, fields).items():
            out[name].append(value)
    if stack:
        import numpy as np
        for field in fields:
            values = out[field["name"]]
            if not values or any(v is None for v in values):
                continue
            if field["type"] in _NUMPY_SCALAR:
                out[field["name"]] = np.array(values, dtype=_NUMPY_SCALAR[field["type"]])
            elif field["type"] == "ndarray" and None not in field["shape"]:
                out[field["name"]] = np.stack(values)
    return out


_NUMPY_SCALAR = {"int64": "int64", "float32": "float32", "float64": "float64"}
