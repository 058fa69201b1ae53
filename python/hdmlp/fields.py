"""Samples with fields: reading a field record (hdmlp.h, format/FORMAT.md) without copying.

A dataset whose only fields are one byte string and the label delivers each sample as that
value's bytes. Any other (`Dataset.field_records` is True) delivers each sample as a field
record; `sample_fields` turns one into a dict by field name:

    ds = hdmlp.Dataset("pairs.hdmlp")
    for batch in hdmlp.Loader(ds, batch_size=64, memory="25%"):
        for sample in batch.samples:
            f = hdmlp.sample_fields(sample, ds.fields)
            image, caption = f["jpg"], bytes(f["txt"]).decode()

Stored values (bytes, text, JSON, ndarray, image) are memoryviews into the sample's buffer,
valid while the batch is; scalars are int (int64) or float (float32, float64); an absent
value is None.
"""
import struct

_MAGIC = 0x46534448  # "HDSF"
_HEAD = struct.Struct("<II")
_ENTRY = struct.Struct("<QIBB2x")
_STORED, _INLINE = 1, 2
_INT64, _FLOAT32, _FLOAT64 = 3, 4, 5


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
