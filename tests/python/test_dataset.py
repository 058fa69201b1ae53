"""hdmlp.Dataset: map-style access, metadata, lifetime."""
import array

import pytest

import hdmlp


def test_len_classes_and_labels(small_ds):
    with hdmlp.Dataset(small_ds.path) as ds:
        assert len(ds) == small_ds.n
        assert ds.classes == ["ant", "bee", "cat", "dog"]
        assert ds.class_to_idx == {"ant": 0, "bee": 1, "cat": 2, "dog": 3}
        assert ds.chunk_size == 16
        assert ds.chunk_count == (small_ds.n + 15) // 16
        assert ds.raw_bytes == small_ds.raw_bytes
        assert ds.seed == 11
        labels = ds.labels
        assert isinstance(labels, array.array) and labels.typecode == "q"
        assert len(labels) == small_ds.n
        for i in range(0, small_ds.n, 7):
            assert labels[i] == ds.info(i)["label"]


def test_getitem_matches_source_files(small_ds):
    ds = hdmlp.Dataset(small_ds.path)
    for i in range(len(ds)):
        info = ds.info(i)
        assert info["index"] == i and info["chunk"] == i // 16 and info["slot"] == i % 16
        assert ds[i] == small_ds.files[info["name"]]
        assert info["key"] == info["name"].encode()
        assert info["label_name"] == info["name"].split("/")[0]
        assert info["raw_size"] == len(ds[i])
        assert info["codec"] in ("none", "zstd", "zstd-dict")
    codecs = {ds.info(i)["codec"] for i in range(len(ds))}
    assert {"none", "zstd"} <= codecs, "test data should exercise both codecs"


def test_negative_index_iteration_and_read_into(small_ds):
    ds = hdmlp.Dataset(small_ds.path)
    assert ds[-1] == ds[len(ds) - 1]
    assert ds.read(3) == ds[3]
    items = list(ds)
    assert len(items) == len(ds) and items[5] == ds[5]
    size = ds.info(9)["raw_size"]
    buf = bytearray(size + 10)
    assert ds.read_into(9, buf) == size
    assert bytes(buf[:size]) == ds[9]
    if size > 0:
        with pytest.raises(hdmlp.InvalidArgumentError, match="buffer"):
            ds.read_into(9, bytearray(size - 1))


def test_index_errors(small_ds):
    ds = hdmlp.Dataset(small_ds.path)
    with pytest.raises(IndexError):
        ds[len(ds)]
    with pytest.raises(IndexError):
        ds[-len(ds) - 1]
    with pytest.raises(TypeError):
        ds["0"]
    with pytest.raises(TypeError):
        ds[1.0]


def test_find(small_ds):
    ds = hdmlp.Dataset(small_ds.path)
    key = ds.info(42)["name"]
    assert ds.find(key) == 42
    assert ds.find(key.encode()) == 42
    with pytest.raises(KeyError):
        ds.find("no/such/key")


def test_verify_passes(small_ds):
    hdmlp.Dataset(small_ds.path).verify()


def test_close_is_refused_while_a_loader_uses_it(small_ds):
    ds = hdmlp.Dataset(small_ds.path)
    ld = hdmlp.Loader(ds, 32, "100%")
    with pytest.raises(hdmlp.StateError, match="loader"):
        ds.close()
    ld.close()
    ds.close()
    ds.close()  # idempotent
    assert ds.closed
    with pytest.raises(hdmlp.StateError, match="closed"):
        len(ds)
    with pytest.raises(hdmlp.StateError):
        ds[0]
    assert "closed" in repr(ds)


def test_pathlike_and_bytes_paths(small_ds):
    import pathlib
    assert len(hdmlp.Dataset(pathlib.Path(small_ds.path))) == small_ds.n
    assert len(hdmlp.Dataset(small_ds.path.encode())) == small_ds.n
