"""on_corrupt='fail' | 'skip': a flipped byte in a packed segment fails the loader naming the
sample, or is left out of its batch and counted (stats()['skipped_samples'], last_skip)."""
import glob
import os
import shutil

import pytest
from conftest import pack, write_tree

import hdmlp

MEM = "40%"


def corrupt_copy(small_ds, tmp_path):
    """A copy of small_ds with one byte flipped in the middle of a sample stored raw (its
    bytes found in a segment file). Returns (path, index of the bad sample)."""
    path = str(tmp_path / "bad.hdmlp")
    shutil.copytree(small_ds.path, path)
    ds = hdmlp.Dataset(path)
    segments = {f: open(f, "rb").read() for f in sorted(glob.glob(os.path.join(path, "seg*")))}
    for i in range(len(ds) // 2, len(ds)):
        info = ds.info(i)
        if info["codec"] != "none" or info["raw_size"] < 200:
            continue
        data = ds[i]
        hits = [(f, buf.find(data)) for f, buf in segments.items() if buf.find(data) >= 0]
        if len(hits) != 1:
            continue
        f, off = hits[0]
        pos = off + len(data) // 2
        with open(f, "r+b") as fh:
            fh.seek(pos)
            fh.write(bytes([segments[f][pos] ^ 0x5A]))
        ds.close()
        return path, i
    pytest.fail("no raw-stored sample found to corrupt")


def test_fail_mode_raises_naming_the_sample(small_ds, tmp_path):
    path, bad = corrupt_copy(small_ds, tmp_path)
    ld = hdmlp.Loader(path, 32, MEM, seed=3, epochs=1)
    assert ld.on_corrupt == "fail"
    with pytest.raises(hdmlp.CorruptDataError) as ei:
        for _ in ld:
            pass
    e = ei.value
    assert e.code == hdmlp.E_CORRUPT and isinstance(e, hdmlp.Error)
    assert f"sample {bad}" in str(e) and "chunk" in str(e), str(e)
    with pytest.raises(hdmlp.CorruptDataError):  # the loader stays failed
        ld.next_batch()


def test_skip_mode_delivers_every_other_sample_and_counts_the_bad_one(small_ds, tmp_path):
    path, bad = corrupt_copy(small_ds, tmp_path)
    ds = hdmlp.Dataset(small_ds.path)  # the intact copy, to compare bytes
    epochs = 3
    ld = hdmlp.Loader(path, 32, MEM, seed=3, epochs=epochs, on_corrupt="skip")
    assert ld.on_corrupt == "skip" and ld.last_skip == ""
    for e in range(epochs):
        seen, short = [], 0
        for batch in ld:
            assert batch.epoch == e
            short += len(batch) < 32
            for view, idx in zip(batch.samples, batch.indices):
                assert bytes(view) == ds[idx], f"sample {idx} delivered wrong"
            seen.extend(batch.indices)
        assert sorted(seen) == [i for i in range(small_ds.n) if i != bad], f"epoch {e}"
        assert ld.stats()["skipped_samples"] == e + 1
        assert short <= 2  # the bad sample's batch, and the epoch's last
    assert f"sample {bad}" in ld.last_skip and "chunk" in ld.last_skip, ld.last_skip
    assert len(ld) == (small_ds.n + 31) // 32  # batches per epoch unchanged


def test_skip_mode_raises_when_an_epoch_skipped_every_sample(tmp_path):
    """Skipping is for a few bad samples: an epoch that kept none (900 of 900 skipped, issue
    25) raises instead of training on nothing."""
    files = write_tree(str(tmp_path / "src"), 60, lambda r, i: r.randint(100, 400))
    path = pack(str(tmp_path / "src"), str(tmp_path / "all-bad.hdmlp"), "--compress", "none",
                "--chunk-size", "8", "--seed", "5")
    for f in sorted(glob.glob(os.path.join(path, "segment-*"))):
        buf = bytearray(open(f, "rb").read())
        for data in files.values():
            off = buf.find(data)
            assert off >= 0
            buf[off + len(data) // 2] ^= 0x5A
        open(f, "wb").write(bytes(buf))
    ld = hdmlp.Loader(path, 8, "1M", seed=3, epochs=2, on_corrupt="skip")
    delivered = 0
    with pytest.raises(hdmlp.CorruptDataError, match="every sample of epoch 0") as ei:
        for batch in ld:
            delivered += len(batch)
    assert delivered == 0 and "60 of 60" in str(ei.value), str(ei.value)
    assert ld.stats()["skipped_samples"] == 60
    with pytest.raises(hdmlp.CorruptDataError):  # the loader stays failed
        ld.next_batch()


def test_on_corrupt_values(small_ds):
    with pytest.raises(hdmlp.InvalidArgumentError, match="on_corrupt"):
        hdmlp.Loader(small_ds.path, 32, MEM, on_corrupt="ignore")
    with pytest.raises(TypeError, match="on_corrupt"):
        hdmlp.Loader(small_ds.path, 32, MEM, on_corrupt=1)
    assert hdmlp.Loader(small_ds.path, 32, MEM, on_corrupt="SKIP").on_corrupt == "skip"
    assert hdmlp.Loader(small_ds.path, 32, MEM, on_corrupt=None).on_corrupt == "fail"
