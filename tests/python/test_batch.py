"""Batches: zero-copy views, lifetime (export count), release, memory safety."""
import ctypes
import gc

import numpy as np
import pytest

import hdmlp

MEM = "40%"


def address(view):
    return np.frombuffer(view, dtype=np.uint8).__array_interface__["data"][0]


def test_sample_views_point_into_the_c_batch(small_ds):
    ld = hdmlp.Loader(small_ds.path, 64, MEM, seed=1)
    batch = next(iter(ld))
    addrs = batch._addresses()
    views = batch.samples
    nonempty = [i for i, v in enumerate(views) if len(v) > 0]
    assert nonempty
    for i in nonempty:
        assert address(views[i]) == addrs[i]        # the C library's own memory
        assert address(batch[i]) == addrs[i]        # every access: no copy
        assert address(batch.views(writable=True)[i]) == addrs[i]
    assert len(set(addrs[i] for i in nonempty)) == len(nonempty)


def test_view_outlives_its_batch(small_ds):
    ds = hdmlp.Dataset(small_ds.path)
    ld = hdmlp.Loader(ds, 32, MEM, seed=3, epochs=2)
    it = iter(ld)
    batch = next(it)
    i = max(range(len(batch)), key=lambda k: batch.sizes[k])
    idx = batch.indices[i]
    view = batch[i]
    assert batch.exports == 1
    del batch
    gc.collect()
    # churn the loader's memory: many more batches allocated and released
    for _ in range(10):
        next(it)
    assert bytes(view) == ds[idx]
    assert view.obj is not None


def test_release_refused_while_views_alive_then_frees(small_ds):
    ld = hdmlp.Loader(small_ds.path, 32, MEM, seed=3)
    batch = next(iter(ld))
    view = batch[0]
    with pytest.raises(BufferError, match="view"):
        batch.release()
    assert not batch.released
    del view
    assert batch.exports == 0
    batch.release()
    assert batch.released
    batch.release()  # idempotent
    with pytest.raises(hdmlp.StateError, match="released"):
        batch.samples
    assert len(batch) == 32 and "released" in repr(batch)


def test_context_manager_releases(small_ds):
    ld = hdmlp.Loader(small_ds.path, 32, MEM, seed=3)
    with next(iter(ld)) as batch:
        total = sum(len(v) for v in batch.samples)
    assert batch.released and total >= 0


def test_views_survive_loader_and_dataset_close(small_ds):
    ds = hdmlp.Dataset(small_ds.path)
    expect = {}
    ld = hdmlp.Loader(ds, 32, MEM, seed=6)
    it = iter(ld)
    views = []
    for _ in range(3):
        b = next(it)
        for v, idx in zip(b.samples, b.indices):
            expect[len(views)] = ds[idx]
            views.append(v)
    del b, it
    ld.close()
    del ld
    ds.close()
    del ds
    gc.collect()
    for k, v in enumerate(views):
        assert bytes(v) == expect[k]


def test_views_are_read_only_unless_asked(small_ds):
    ld = hdmlp.Loader(small_ds.path, 32, MEM, seed=3)
    batch = next(iter(ld))
    i = next(k for k in range(len(batch)) if batch.sizes[k] > 0)
    with pytest.raises(TypeError):
        batch[i][0] = 1
    w = batch.views(writable=True)[i]
    w[0] = (w[0] + 1) % 256  # memory owned by this batch alone
    assert batch[i][0] == w[0]


def test_copy_into(fixed_ds):
    ds = hdmlp.Dataset(fixed_ds.path)
    ld = hdmlp.Loader(ds, 10, "50%", seed=1)
    batch = next(iter(ld))
    out = np.zeros((10, 784), dtype=np.uint8)
    assert batch.copy_into(out) == 10 * 784
    for row, idx in zip(out, batch.indices):
        assert row.tobytes() == ds[idx]
    with pytest.raises(hdmlp.InvalidArgumentError, match="buffer"):
        batch.copy_into(bytearray(100))
    with pytest.raises(BufferError):
        batch.copy_into(b"read-only")


def test_holding_batches_past_the_budget_is_a_clear_error(small_ds):
    ds = hdmlp.Dataset(small_ds.path)
    ld = hdmlp.Loader(ds, 32, MEM, seed=3, epochs=1)
    held = []
    it = iter(ld)
    with pytest.raises(hdmlp.OutOfMemoryError, match="release"):
        for batch in it:
            held.append(batch)
    assert isinstance(hdmlp.OutOfMemoryError("x"), MemoryError)
    got = [i for b in held for i in b.indices]
    held.clear()
    # releasing lets the same iterator continue where it stopped: nothing lost
    for batch in it:
        got.extend(batch.indices)
    assert sorted(got) == list(range(small_ds.n))


def mem_kib():
    """KiB in use by this process: the resident set, or under ASan (whose quarantine keeps
    freed memory resident for a while) the heap bytes ASan counts as allocated."""
    asan_heap = getattr(ctypes.CDLL(None), "__sanitizer_get_current_allocated_bytes", None)
    if asan_heap is not None:
        asan_heap.restype = ctypes.c_size_t
        return asan_heap() // 1024
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4


def test_many_short_lived_loaders_do_not_leak(small_ds):
    ds = hdmlp.Dataset(small_ds.path)

    def cycle():
        ld = hdmlp.Loader(ds, 64, MEM, seed=1, epochs=1)
        n = 0
        for batch in ld:
            n += 1
            view = batch[0]  # the last one outlives the loader
        ld.close()
        assert n == len(ld) and len(view) >= 0

    for _ in range(20):
        cycle()
    gc.collect()
    before = mem_kib()
    for _ in range(200):
        cycle()
    gc.collect()
    grown = mem_kib() - before
    assert grown < 4096, f"memory in use grew by {grown} KiB over 200 loader cycles"
