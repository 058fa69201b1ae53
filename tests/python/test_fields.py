"""Samples with fields from Python: Dataset.fields describes them, Dataset.field_records says
how samples come, and hdmlp.sample_fields reads each field of a delivered sample without
copying, through Dataset[i] and through a Loader (every sample once an epoch)."""
import json
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


def need_pack():
    if not os.environ.get("HDMLP_PACK"):
        pytest.skip("HDMLP_PACK not set (run through ctest)")


def make_rows(root, n=90):
    """n samples as files and values: an image file, a caption (absent for i % 7 == 3), JSON
    metadata, a label, a float and an int, an array of varying rows (.npy, float32) and one of
    a fixed shape (.npy, int16). Returns the rows as the manifest states them."""
    import numpy as np
    (root / "files").mkdir()
    rows = []
    for i in range(n):
        img = root / "files" / f"{i:04d}.png"
        img.write_bytes(b"\x89PNG fake image bytes " + bytes([i % 256]) * (5 + i))
        var = np.arange(3 * (i % 5), dtype=np.float32).reshape(-1, 3) + i
        fix = np.full((2, 4), i - 40, dtype=np.int16)
        np.save(root / "files" / f"{i:04d}.var.npy", var)
        np.save(root / "files" / f"{i:04d}.fix.npy", fix)
        rows.append({"__key__": f"s{i:04d}", "image": f"files/{i:04d}.png",
                     "caption": None if i % 7 == 3 else f"caption \u00e9 \"{i}\"\n",
                     "meta": {"i": i, "tags": ["a", i]}, "label": f"class{i % 3}",
                     "score": i / 4, "count": i - 10,
                     "var": f"files/{i:04d}.var.npy", "fix": f"files/{i:04d}.fix.npy"})
    return rows


def check_row(row, got, root):
    import numpy as np
    assert bytes(got["image"]) == (root / row["image"]).read_bytes()
    assert (None if got["caption"] is None else str(got["caption"], "utf-8")) == row["caption"]
    assert json.loads(str(got["meta"], "utf-8")) == row["meta"]
    assert got["score"] == row["score"] and got["count"] == row["count"]
    for name in ("var", "fix"):
        want = np.load(root / row[name])
        assert got[name].dtype == want.dtype and got[name].shape == want.shape
        assert np.array_equal(got[name], want)


def test_jsonl_manifest_round_trip(tmp_path):
    """A JSONL manifest of image files, text, JSON, label, scalars and .npy arrays packs into
    typed fields that Dataset[i] and a Loader give back value for value, every sample once."""
    need_pack()
    rows = make_rows(tmp_path)
    (tmp_path / "m.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "ds"
    hdmlp.pack(None, str(out), manifests=[str(tmp_path / "m.jsonl")],
               file_fields=["image", "var", "fix"], require_fields="image")
    by_key = {r["__key__"]: r for r in rows}
    with hdmlp.Dataset(str(out)) as ds:
        assert ds.field_records
        assert [(f["name"], f["type"], f["dtype"], f["shape"], f["required"])
                for f in ds.fields] == [
            ("caption", "text", None, (), False), ("count", "int64", None, (), True),
            ("fix", "ndarray", "int16", (2, 4), True), ("image", "image", None, (), True),
            ("label", "int64", None, (), True), ("meta", "json", None, (), True),
            ("score", "float64", None, (), True), ("var", "ndarray", "float32", (None, 3), True)]
        assert ds.classes == ["class0", "class1", "class2"]
        for i in range(0, len(ds), 11):
            row = by_key[ds.info(i)["key"].decode()]
            check_row(row, hdmlp.sample_fields(ds[i], ds.fields), tmp_path)
        seen = set()
        for batch in hdmlp.Loader(ds, batch_size=16, memory="1MB", seed=2, epochs=1):
            for s, i, label in zip(batch.samples, batch.indices, batch.labels):
                row = by_key[ds.info(i)["key"].decode()]
                got = hdmlp.sample_fields(s, ds.fields)
                check_row(row, got, tmp_path)
                assert ds.classes[label] == row["label"] and got["label"] == label
                assert i not in seen
                seen.add(i)
        assert len(seen) == len(rows)
        batch = next(iter(hdmlp.Loader(ds, batch_size=16, memory="1MB", seed=2, epochs=1)))
        lists, stacked = (hdmlp.batch_fields(batch.samples, ds.fields, stack=s)
                          for s in (False, True))
        assert stacked["fix"].shape == (16, 2, 4) and stacked["count"].dtype == "int64"
        assert stacked["count"].tolist() == lists["count"]
        assert all((a == b).all() for a, b in zip(stacked["fix"], lists["fix"]))
        assert isinstance(stacked["var"], list) and isinstance(stacked["caption"], list)
    # --extract writes each field; ndarrays as .npy files numpy reads back
    import numpy as np
    subprocess.run([os.environ["HDMLP_PACK"], "--extract", str(out), "s0004", "-o",
                    str(tmp_path / "x")], check=True, capture_output=True)
    for name in ("var", "fix"):
        got, want = np.load(tmp_path / f"x.{name}"), np.load(tmp_path / rows[4][name])
        assert got.dtype == want.dtype and np.array_equal(got, want)
    assert (tmp_path / "x.image").read_bytes() == (tmp_path / rows[4]["image"]).read_bytes()


def test_csv_manifest_round_trip(tmp_path):
    """A CSV manifest: quoted cells (commas, quotes, newlines), numbers as int64 and
    float64, empty cells absent, class-number labels numbered by value."""
    need_pack()
    import csv
    (tmp_path / "a.bin").write_bytes(b"\0\1\2")
    rows = [{"image": "a.bin", "text": f'row {i}, "quoted"\nsecond line' if i % 2 else "",
             "n": str(i * 3), "x": f"{i / 8}", "label": str(i % 12)} for i in range(40)]
    with open(tmp_path / "m.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    out = tmp_path / "ds"
    hdmlp.pack(None, str(out), manifests=str(tmp_path / "m.csv"))
    with hdmlp.Dataset(str(out)) as ds:
        assert [(f["name"], f["type"], f["required"]) for f in ds.fields] == [
            ("image", "bytes", True), ("label", "int64", True), ("n", "int64", True),
            ("text", "text", False), ("x", "float64", True)]
        assert ds.classes == [str(c) for c in range(12)]  # by value, not "10" < "2"
        for i in range(len(ds)):
            got = hdmlp.sample_fields(ds[i], ds.fields)
            row = rows[got["n"] // 3]
            assert bytes(got["image"]) == b"\0\1\2"
            assert got["n"] == int(row["n"]) and got["x"] == float(row["x"])
            assert got["label"] == int(row["label"])
            assert (None if got["text"] is None else str(got["text"], "utf-8")) == \
                (row["text"] or None)


def test_webdataset_npy_members_are_arrays(tmp_path):
    """.npy members of WebDataset shards become an ndarray field (sizes that vary lead each
    value); arrays of another dtype in the same field are refused naming the member."""
    need_pack()
    import io
    import tarfile
    import numpy as np

    def shard(path, bad=False):
        with tarfile.open(path, "w") as tf:
            for i in range(30):
                a = np.arange(i % 4 + 1, dtype=np.float64 if bad and i == 17 else np.uint8)
                buf = io.BytesIO()
                np.save(buf, a)
                for ext, data in (("cls", b"%d" % (i % 2)), ("npy", buf.getvalue())):
                    ti = tarfile.TarInfo(f"{i:03d}.{ext}")
                    ti.size = len(data)
                    tf.addfile(ti, io.BytesIO(data))
    shard(tmp_path / "a.tar")
    hdmlp.pack(str(tmp_path / "a.tar"), str(tmp_path / "ds"), webdataset=True)
    with hdmlp.Dataset(str(tmp_path / "ds")) as ds:
        assert [(f["name"], f["type"], f["dtype"], f["shape"]) for f in ds.fields] == [
            ("cls", "int64", None, ()), ("npy", "ndarray", "uint8", (None,))]
        for i in range(len(ds)):
            k = int(ds.info(i)["key"])
            assert hdmlp.sample_fields(ds[i], ds.fields)["npy"].tolist() == \
                list(range(k % 4 + 1))
    shard(tmp_path / "b.tar", bad=True)
    with pytest.raises(hdmlp.Error, match=r"017\.npy.*field npy.*float64.*uint8"):
        hdmlp.pack(str(tmp_path / "b.tar"), str(tmp_path / "ds2"), webdataset=True)


@pytest.mark.parametrize("text,match", [
    ('{"image": "x.bin", "label": 1}\n{"image": "x.bin", "label": 2,}\n',
     r"m\.jsonl:2: malformed JSON"),
    ('{"image": "x.bin", "label": 1, "c": "a"}\n{"image": "x.bin", "label": 2}\n',
     r"m\.jsonl:2: no value of the required field c"),
    ('{"image": "missing.png", "label": 1}\n', r"m\.jsonl:1: column image: cannot read"),
    ('{"image": "x.bin", "label": 1}\n{"image": "x.bin"}\n',
     r"m\.jsonl:2: lacks the label column label"),
    ('{"image": "x.bin", "label": 1, "a": "bad.npy"}\n', r"m\.jsonl:1: column a: field a: "
     r"not an \.npy file"),
    ('{"image": 5, "label": 1}\n', r"m\.jsonl:1: column image: must be a string"),
])
def test_manifest_errors_name_the_row_and_field(tmp_path, text, match):
    need_pack()
    (tmp_path / "x.bin").write_bytes(b"xyz")
    (tmp_path / "bad.npy").write_bytes(b"not numpy at all")
    (tmp_path / "m.jsonl").write_text(text)
    with pytest.raises(hdmlp.Error, match=match):
        hdmlp.pack(None, str(tmp_path / "ds"), manifests=str(tmp_path / "m.jsonl"),
                   file_fields="image,a", require_fields="image,c" if "c" in text else None)
    assert not (tmp_path / "ds").exists()


def test_torch_dicts_by_field_with_workers(tmp_path):
    """hdmlp.torch yields a dict by field name: stacked fixed-shape arrays, lists of varying
    ones, str captions, parsed JSON, scalar tensors; the same with 2 DataLoader workers, every
    sample once; a collate_fields hook replaces the default."""
    need_pack()
    torch = pytest.importorskip("torch")
    import hdmlp.torch
    rows = make_rows(tmp_path, 64)
    (tmp_path / "m.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = str(tmp_path / "ds")
    hdmlp.pack(None, out, manifests=str(tmp_path / "m.jsonl"),
               file_fields=["image", "var", "fix"])
    by_count = {r["count"]: r for r in rows}

    def epoch(workers, **kw):
        ds = hdmlp.torch.HdmlpIterableDataset(out, batch_size=10, memory="4MB", seed=5,
                                              with_indices=True, **kw)
        dl = hdmlp.torch.DataLoader(ds, batch_size=None, num_workers=workers)
        return list(dl)

    seen = []
    for item in epoch(0):
        assert item["fix"].shape == (len(item["count"]), 2, 4)
        assert item["count"].dtype == torch.int64 and item["score"].dtype == torch.float64
        for j, c in enumerate(item["count"].tolist()):
            row = by_count[c]
            assert item["caption"][j] == row["caption"] and item["meta"][j] == row["meta"]
            assert item["var"][j].shape == (len(item["var"][j]), 3)
            assert bytes(item["image"][j].numpy()) == (tmp_path / row["image"]).read_bytes()
            assert int(item["fix"][j, 0, 0]) == c + 10 - 40
            seen.append(c)
    assert sorted(seen) == sorted(by_count)
    with_workers = epoch(2)
    assert [i["count"].tolist() for i in with_workers] == \
        [i["count"].tolist() for i in epoch(0)]
    assert all(torch.equal(a["fix"], b["fix"]) for a, b in zip(with_workers, epoch(0)))
    hooked = epoch(2, collate_fields=lambda samples: sorted(s["count"] for s in samples))
    assert sorted(c for batch in hooked for c in batch) == sorted(by_count)


def test_image_pipeline_decodes_the_image_field(tmp_path):
    """Loader(image=...) on samples with fields decodes the image field, pixel for pixel as
    on a dataset of those images alone, and passes the other fields through as
    batch.records; hdmlp.torch gives one dict (images under the field's name) with and
    without workers, every sample once; a field that is not an image is refused by name."""
    need_pack()
    torch = pytest.importorskip("torch")
    np = pytest.importorskip("numpy")
    from PIL import Image
    import hdmlp.torch
    (tmp_path / "img").mkdir()
    rows = []
    for i in range(40):
        a = (np.arange(20 * (24 + i) * 3).reshape(20, 24 + i, 3) * (i + 1) % 251).astype("u1")
        Image.fromarray(a).save(tmp_path / "img" / f"{i}.png")
        rows.append({"__key__": f"k{i:02d}", "image": f"img/{i}.png", "label": i % 3,
                     "caption": f"picture {i}", "n": i})
    (tmp_path / "all.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "img.jsonl").write_text("".join(
        json.dumps({k: r[k] for k in ("__key__", "image", "label")}) + "\n" for r in rows))
    fielded, plain = str(tmp_path / "fielded"), str(tmp_path / "plain")
    hdmlp.pack(None, fielded, manifests=str(tmp_path / "all.jsonl"))
    hdmlp.pack(None, plain, manifests=str(tmp_path / "img.jsonl"))
    pipe = hdmlp.ImagePipeline(16, mode="val")

    def images(path, check_records):
        out = {}
        with hdmlp.Dataset(path) as ds:
            for b in hdmlp.Loader(ds, batch_size=8, memory="4MB", seed=1, epochs=1,
                                  image=pipe):
                recs = b.records if check_records else [None] * len(b)
                for img, i, rec in zip(b.images, b.indices, recs):
                    key = ds.info(i)["key"].decode()
                    if check_records:
                        got = hdmlp.sample_fields(rec, ds.fields)
                        assert str(got["caption"], "utf-8") == f"picture {int(key[1:])}"
                    else:
                        assert b.records is None
                    out[key] = img.copy()
        return out
    a, b = images(fielded, True), images(plain, False)
    assert sorted(a) == sorted(b) == sorted(r["__key__"] for r in rows)
    assert all(np.array_equal(a[k], b[k]) for k in a)

    for workers in (0, 2):
        ds = hdmlp.torch.HdmlpIterableDataset(fielded, batch_size=8, memory="4MB", seed=1,
                                              image=pipe)
        seen = []
        for it in hdmlp.torch.DataLoader(ds, batch_size=None, num_workers=workers):
            assert it["image"].shape == (len(it["n"]), 16, 16, 3)
            assert it["caption"] == [f"picture {n}" for n in it["n"].tolist()]
            for img, n in zip(it["image"], it["n"].tolist()):
                assert np.array_equal(img.numpy(), a[f"k{n:02d}"])
            seen += it["n"].tolist()
            del it  # zero-copy images (workers=0): the batch goes back to the loader
        assert sorted(seen) == list(range(40))
    with hdmlp.Dataset(fielded) as ds:
        with pytest.raises(hdmlp.InvalidArgumentError, match="image field caption: of type text"):
            hdmlp.Loader(ds, batch_size=8, memory="4MB",
                         image=hdmlp.ImagePipeline(16, field="caption"))
