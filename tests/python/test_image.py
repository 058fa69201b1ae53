"""hdmlp.ImagePipeline: Loader(image=...) batches as zero-copy numpy arrays and torch tensors
(shape, dtype, layout, normalisation), exactly once per epoch, reproducible for a seed,
pixels equal to torchvision's Resize + CenterCrop, corrupt images under on_corrupt
fail/skip, and the same sequence through DataLoader(num_workers=2)."""
import io
import os
import pickle

import numpy as np
import pytest

import hdmlp
from conftest import SEED, SHORT, pack

PIL = pytest.importorskip("PIL.Image")

N = 120 if SHORT else 240
CLASSES = ("ant", "bee", "cat")
BATCH = 16


def _image(rng, w, h):
    x = np.linspace(0, 255, w)[None, :, None]
    y = np.linspace(0, 255, h)[:, None, None]
    base = x * rng.uniform(0.2, 0.8) + y * rng.uniform(0.2, 0.8)
    return (base + rng.normal(0, 12, (h, w, 3))).clip(0, 255).astype(np.uint8)


def _write_images(root, n, bad=()):
    """n JPEG/PNG files (every fifth a PNG; every seventh grey) of 40-120 px under
    root/<class>/; keys in `bad` hold damaged bytes. Returns {key: encoded bytes}."""
    rng = np.random.default_rng(SEED)
    files = {}
    for c in CLASSES:
        os.makedirs(os.path.join(root, c), exist_ok=True)
    for i in range(n):
        key = f"{CLASSES[i % len(CLASSES)]}/{i:04d}.{'png' if i % 5 == 0 else 'jpg'}"
        im = PIL.fromarray(_image(rng, int(rng.integers(40, 121)), int(rng.integers(40, 121))))
        if i % 7 == 3:
            im = im.convert("L")
        buf = io.BytesIO()
        im.save(buf, format="PNG" if key.endswith("png") else "JPEG", quality=92)
        data = buf.getvalue()
        if key in bad:
            data = data[: len(data) // 2] if key.endswith("jpg") else b"\x89PNG\r\n\x1a\nbroken"
        with open(os.path.join(root, key), "wb") as f:
            f.write(data)
        files[key] = data
    return files


@pytest.fixture(scope="module")
def images_ds(tmp_root):
    src = os.path.join(tmp_root, "images-src")
    files = _write_images(src, N)
    path = pack(src, os.path.join(tmp_root, "images.hdmlp"), "--chunk-size", "8", "--seed", "5")
    return path, files


@pytest.fixture(scope="module")
def bad_ds(tmp_root):
    src = os.path.join(tmp_root, "images-bad-src")
    bad = {"bee/0016.jpg", "ant/0015.png"}  # a truncated JPEG, a broken PNG
    files = _write_images(src, 60, bad=bad)
    assert bad <= set(files)
    path = pack(src, os.path.join(tmp_root, "images-bad.hdmlp"), "--chunk-size", "8",
                "--seed", "5")
    return path, files, bad


def epoch(loader):
    """[(images copy, labels, indices)] of one epoch, releasing every batch."""
    out = []
    for batch in loader:
        out.append((batch.images.copy(), list(batch.labels), list(batch.indices)))
        del batch
    return out


def test_shapes_dtypes_zero_copy(images_ds):
    path, _ = images_ds
    pipe = hdmlp.ImagePipeline(32)
    with hdmlp.Loader(path, BATCH, "16M", seed=1, epochs=1, image=pipe) as ld:
        batch = next(iter(ld))
        images = batch.images
        assert isinstance(images, np.ndarray)
        assert images.shape == (BATCH, 32, 32, 3) and images.dtype == np.uint8
        assert images.flags["C_CONTIGUOUS"] and images.flags["WRITEABLE"]
        assert not images.flags["OWNDATA"]  # a view of the batch's buffer
        assert batch.exports >= 1
        with pytest.raises(BufferError):
            batch.release()  # the array still views it
        assert len(batch.labels) == BATCH
        del images
        batch.release()
        assert batch.released


def test_nchw_float_normalised_matches_uint8(images_ds):
    path, _ = images_ds
    u8 = hdmlp.ImagePipeline(24, mode="val", crop_fraction=1.0)
    f32 = hdmlp.ImagePipeline(24, mode="val", crop_fraction=1.0, layout="NCHW",
                              dtype="float32", normalize=True)
    # a budget roomy enough that both pipelines' shares leave every chunk its slot: the same
    # order (the order follows the budget less the pipeline's share, budget_images); the
    # other tests use it too, as the dataset is small (smaller still with HDMLP_TEST_SHORT)
    a = epoch(hdmlp.Loader(path, BATCH, "16M", seed=2, epochs=1, image=u8))
    b = epoch(hdmlp.Loader(path, BATCH, "16M", seed=2, epochs=1, image=f32))
    assert [x[2] for x in a] == [x[2] for x in b]
    x8 = np.concatenate([x[0] for x in a]).astype(np.float32)
    xf = np.concatenate([x[0] for x in b])
    assert xf.shape == (N, 3, 24, 24) and xf.dtype == np.float32
    mean = np.array(hdmlp.IMAGENET_MEAN, np.float32)[None, :, None, None]
    std = np.array(hdmlp.IMAGENET_STD, np.float32)[None, :, None, None]
    want = (x8.transpose(0, 3, 1, 2) / 255.0 - mean) / std
    # float output is normalised before 8-bit rounding: within one level of the uint8 one
    assert np.abs(xf - want).max() <= 1.01 / 255 / std.min()


def test_grey_channel_and_pickle(images_ds):
    path, _ = images_ds
    pipe = hdmlp.ImagePipeline((20, 28), channels=1, flip=0.0)
    assert pickle.loads(pickle.dumps(pipe)) == pipe
    assert pipe.shape == (20, 28, 1) and pipe.image_bytes == 560
    out = epoch(hdmlp.Loader(path, BATCH, "16M", seed=3, epochs=1, image=pipe))
    assert out[0][0].shape == (BATCH, 20, 28, 1)


def test_exactly_once_and_labels(images_ds):
    path, files = images_ds
    ds = hdmlp.Dataset(path)
    pipe = hdmlp.ImagePipeline(16)
    ld = hdmlp.Loader(ds, BATCH, "16M", seed=4, epochs=2, image=pipe)
    for _ in range(2):
        seen = []
        for images, labels, indices in epoch(ld):
            assert images.shape[0] == len(labels) == len(indices)
            assert labels == [ds.info(i)["label"] for i in indices]
            seen += indices
        assert sorted(seen) == list(range(N))
    assert ld.stats()["images_decoded"] == 2 * N


def test_reproducible_for_a_seed(images_ds):
    path, _ = images_ds
    pipe = hdmlp.ImagePipeline(24, threads=2)
    a = epoch(hdmlp.Loader(path, BATCH, "16M", seed=7, epochs=1, image=pipe))
    b = epoch(hdmlp.Loader(path, BATCH, "16M", seed=7, epochs=1,
                           image=hdmlp.ImagePipeline(24, threads=1)))
    c = epoch(hdmlp.Loader(path, BATCH, "16M", seed=8, epochs=1, image=pipe))
    assert all(np.array_equal(x[0], y[0]) and x[2] == y[2] for x, y in zip(a, b))
    # another seed: another order, and the same sample gets another crop
    crops_a = {i: im for x in a for i, im in zip(x[2], x[0])}
    crops_c = {i: im for x in c for i, im in zip(x[2], x[0])}
    assert [x[2] for x in a] != [x[2] for x in c]
    assert sum(np.array_equal(crops_a[i], crops_c[i]) for i in crops_a) < N // 10


def test_val_pixels_equal_torchvision(images_ds):
    tv = pytest.importorskip("torchvision.transforms")
    path, files = images_ds
    ds = hdmlp.Dataset(path)
    keys = [ds.info(i)["key"].decode() for i in range(len(ds))]
    pipe = hdmlp.ImagePipeline(32, mode="val", crop_fraction=1.0, dct_scaling=False)
    ref = tv.Compose([tv.Resize(32), tv.CenterCrop(32)])
    worst = 0
    for images, _, indices in epoch(hdmlp.Loader(ds, BATCH, "16M", seed=9, epochs=1,
                                                 image=pipe)):
        for im, i in zip(images, indices):
            want = np.asarray(ref(PIL.open(io.BytesIO(files[keys[i]])).convert("RGB")))
            worst = max(worst, int(np.abs(im.astype(int) - want.astype(int)).max()))
    assert worst <= 2, f"largest difference to torchvision: {worst} levels"


def test_fast_decode_opt_in_close_to_accurate(images_ds):
    path, _ = images_ds
    ds = hdmlp.Dataset(path)
    is_jpeg = [ds.info(i)["key"].decode().endswith("jpg") for i in range(len(ds))]
    accurate = hdmlp.ImagePipeline(32, mode="val", crop_fraction=1.0, dct_scaling=False)
    fast = hdmlp.ImagePipeline(32, mode="val", crop_fraction=1.0, dct_scaling=False,
                               fast_decode=True)
    assert accurate.fast_decode == 0 and fast.fast_decode == 1
    assert "fast_decode=1" in repr(fast) and pickle.loads(pickle.dumps(fast)) == fast
    a = epoch(hdmlp.Loader(ds, BATCH, "16M", seed=9, epochs=1, image=accurate))
    b = epoch(hdmlp.Loader(ds, BATCH, "16M", seed=9, epochs=1, image=fast))
    assert [x[2] for x in a] == [x[2] for x in b]
    ia = {i: im.astype(int) for x in a for im, i in zip(x[0], x[2])}
    ib = {i: im.astype(int) for x in b for im, i in zip(x[0], x[2])}
    jpeg_diff = [np.abs(ia[i] - ib[i]).mean() for i in ia if is_jpeg[i]]
    assert all(np.array_equal(ia[i], ib[i]) for i in ia if not is_jpeg[i])  # PNG: untouched
    assert max(jpeg_diff) > 0, "fast_decode changed no JPEG"
    assert np.mean(jpeg_diff) < 3, f"mean absolute difference {np.mean(jpeg_diff):.2f}"


def test_corrupt_images_fail_or_skip(bad_ds):
    path, files, bad = bad_ds
    ds = hdmlp.Dataset(path)
    bad_idx = {i for i in range(len(ds)) if ds.info(i)["key"].decode() in bad}
    pipe = hdmlp.ImagePipeline(16)
    with pytest.raises(hdmlp.CorruptDataError) as e:
        epoch(hdmlp.Loader(ds, 8, "8M", seed=1, epochs=1, image=pipe))
    assert any(k in str(e.value) for k in bad) or any(str(i) in str(e.value) for i in bad_idx)
    ld = hdmlp.Loader(ds, 8, "8M", seed=1, epochs=1, image=pipe, on_corrupt="skip")
    out = epoch(ld)
    seen = [i for x in out for i in x[2]]
    assert sorted(seen) == sorted(set(range(len(ds))) - bad_idx)
    assert all(x[0].shape[0] == len(x[1]) for x in out)
    stats = ld.stats()
    assert stats["skipped_samples"] == stats["decode_failures"] == len(bad)


def test_bad_arguments():
    with pytest.raises(hdmlp.InvalidArgumentError, match="scale"):
        hdmlp.ImagePipeline(224, scale=(0.5, 0.1))
    with pytest.raises(ValueError):
        hdmlp.ImagePipeline(224, layout="HWNC")
    with pytest.raises(ValueError, match="std"):
        hdmlp.ImagePipeline(224, dtype="float32", mean=(0, 0, 0), std=(1, 0, 1))
    with pytest.raises(hdmlp.InvalidArgumentError):
        hdmlp.ImagePipeline(0)


def test_released_buffers_reused_held_ones_kept(images_ds):
    """Released batches' buffers come back for later batches; an array still viewing a batch
    keeps its buffer (never handed to another batch) and its pixels."""
    path, _ = images_ds
    ld = hdmlp.Loader(path, BATCH, "16M", seed=9, epochs=2, image=hdmlp.ImagePipeline(24))
    it = iter(ld)
    held = next(it).images  # the zero-copy view keeps its batch alive
    want = held.copy()
    held_at = held.__array_interface__["data"][0]
    addrs = []
    for batch in it:
        images = batch.images
        addrs.append(images.__array_interface__["data"][0])
        del images
        batch.release()
    assert held_at not in addrs
    # reused, not one buffer a batch (how many are in the pool at once depends on timing)
    assert len(set(addrs)) <= len(addrs) // 2
    assert np.array_equal(held, want)
    del it, ld
    assert np.array_equal(held, want)  # past the loader too


def test_no_pipeline_no_images(images_ds):
    path, _ = images_ds
    batch = next(iter(hdmlp.Loader(path, BATCH, "16M", seed=1, epochs=1)))
    with pytest.raises(hdmlp.StateError, match="ImagePipeline"):
        batch.images


def test_torch_workers_same_sequence(images_ds):
    torch = pytest.importorskip("torch")
    import hdmlp.torch as ht
    path, _ = images_ds
    pipe = hdmlp.ImagePipeline(24)
    runs = {}
    for workers in (0, 2):
        ds = ht.HdmlpIterableDataset(path, BATCH, "16M", seed=11, image=pipe,
                                     with_indices=True)
        dl = ht.DataLoader(ds, batch_size=None, num_workers=workers)
        runs[workers] = [(x.clone(), y.tolist(), i.tolist()) for x, y, i in dl]
        assert all(x.dtype == torch.uint8 and x.shape[1:] == (24, 24, 3)
                   for x, _, _ in runs[workers])
    assert sorted(i for _, _, idx in runs[0] for i in idx) == list(range(N))
    assert len(runs[0]) == len(runs[2])
    for (x0, y0, i0), (x2, y2, i2) in zip(runs[0], runs[2]):
        assert i0 == i2 and y0 == y2 and torch.equal(x0, x2)


def test_train_images_example_runs(images_ds, tmp_root):
    """examples/train_images.py end to end on the test images (labels here are arbitrary,
    so only that both pipelines train, validate and report)."""
    pytest.importorskip("torchvision")
    import json
    import subprocess
    import sys
    from conftest import SOURCE_DIR, tool
    src = os.path.join(tmp_root, "images-src")
    cmd = [sys.executable, os.path.join(SOURCE_DIR, "examples", "train_images.py"), src, src,
           "--size", "24", "--epochs", "1", "--seeds", "0", "--batch-size", "32",
           "--workers", "0", "--threads", "1", "--memory", "64M", "--limit-train", "60", "--json",
           "--workdir", os.path.join(tmp_root, "train-images"), "--hdmlp-pack",
           tool("hdmlp-pack")]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stdout + res.stderr
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    assert set(summary) == {"hdmlp", "torchvision"}
    for name, r in summary.items():
        assert len(r["runs"]) == 1 and 0.0 <= r["mean"] <= 1.0
