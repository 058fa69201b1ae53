"""Samples with fields from Python: Dataset.fields describes them, Dataset.field_records says
how samples come, and hdmlp.sample_fields reads each field of a delivered sample without
copying, through Dataset[i] and through a Loader (every sample once an epoch)."""
import os
import subprocess

import pytest

import hdmlp

MKDS = os.environ.get("HDMLP_MKDS_FIELDS")


def caption(i):
    return None if i % 7 == 3 else f"caption of sample {i}".encode()


@pytest.fixture(scope="module")
def fields_ds(tmp_path_factory):
    if not MKDS:
        pytest.skip("HDMLP_MKDS_FIELDS not set (run through ctest)")
    d = tmp_path_factory.mktemp("fields") / "ds"
    subprocess.run([MKDS, str(d), "500", "16", "91"], check=True)
    return str(d)


def test_fields_are_described(fields_ds):
    with hdmlp.Dataset(fields_ds) as ds:
        assert ds.field_records is True
        assert [f["name"] for f in ds.fields] == ["data", "label", "caption", "score"]
        assert [f["type"] for f in ds.fields] == ["bytes", "int64", "text", "float64"]
        assert [f["label"] for f in ds.fields] == [False, True, False, False]
        assert [f["required"] for f in ds.fields] == [True, True, False, True]
        assert ds.info(3)["codec"] == "fields"


def check(fields, index, label, sample):
    got = hdmlp.sample_fields(sample, fields)
    assert got["label"] == label == index % 4
    assert got["score"] == index / 2
    want = caption(index)
    if want is None:
        assert got["caption"] is None
    else:
        assert isinstance(got["caption"], memoryview)
        assert bytes(got["caption"]) == want


def test_random_access_and_loader(fields_ds):
    with hdmlp.Dataset(fields_ds) as ds:
        fields = ds.fields
        for i in range(0, len(ds), 13):
            check(fields, i, ds.info(i)["label"], ds[i])
        seen = set()
        for batch in hdmlp.Loader(ds, batch_size=32, memory="25%", seed=3, epochs=1):
            for s, i, label in zip(batch.samples, batch.indices, batch.labels):
                check(fields, i, label, s)
                assert i not in seen
                seen.add(i)
        assert len(seen) == len(ds)


def test_bytes_that_are_not_a_field_record_are_refused(fields_ds):
    with hdmlp.Dataset(fields_ds) as ds:
        with pytest.raises(ValueError, match="not a field record"):
            hdmlp.sample_fields(b"\0" * 40, ds.fields)
        with pytest.raises(ValueError, match="not a field record"):
            hdmlp.sample_fields(ds[0][:20], ds.fields)


def test_webdataset_shards_pack_into_fields(tmp_path):
    """A shard of image, caption, JSON and class members packs into fields (hdmlp.pack with
    webdataset=True) that a Loader delivers, every member's bytes under its field's name."""
    import io
    import tarfile

    if not os.environ.get("HDMLP_PACK"):
        pytest.skip("HDMLP_PACK not set (run through ctest)")
    shard = tmp_path / "shard-0.tar"
    want = {}
    with tarfile.open(shard, "w") as tf:
        for i in range(120):
            key = f"{i:05d}"
            members = {"jpg": bytes([i % 256]) * (10 + i), "cls": b"%d" % (i % 3),
                       "json": b'{"i": %d}' % i}
            if i % 4:
                members["txt"] = f"caption {i}".encode()
            for ext, data in members.items():
                ti = tarfile.TarInfo(f"{key}.{ext}")
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
            want[key] = members
    out = tmp_path / "ds"
    hdmlp.pack([str(shard)], str(out), webdataset=True)
    with hdmlp.Dataset(str(out)) as ds:
        assert ds.field_records
        assert [(f["name"], f["type"], f["required"]) for f in ds.fields] == [
            ("cls", "int64", True), ("image", "image", True), ("json", "json", True),
            ("txt", "text", False)]
        seen = 0
        for batch in hdmlp.Loader(ds, batch_size=16, memory="1MB", seed=1, epochs=1):
            for s, i in zip(batch.samples, batch.indices):
                key = ds.info(i)["key"].decode()
                got = hdmlp.sample_fields(s, ds.fields)
                m = want[key]
                assert got["cls"] == int(m["cls"])
                assert bytes(got["image"]) == m["jpg"]
                assert bytes(got["json"]) == m["json"]
                assert (None if got["txt"] is None else bytes(got["txt"])) == m.get("txt")
                seen += 1
        assert seen == 120
