"""hdmlp.torch: IterableDataset + DataLoader with 0, 1, 2 and 4 workers."""
import io

import pytest

torch = pytest.importorskip("torch")

import hdmlp  # noqa: E402
import hdmlp.torch as ht  # noqa: E402
from conftest import epoch_sequences  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

MEM = "40%"


def dl_epochs(ds, workers, epochs, set_epoch=True, **dl_kwargs):
    """Per epoch: indices in delivery order and labels, through a DataLoader."""
    dl = DataLoader(ds, batch_size=None, num_workers=workers, **dl_kwargs)
    out = []
    for e in range(epochs):
        if set_epoch:
            ds.set_epoch(e)
        seq, labels = [], []
        for samples, lab, idx in dl:
            assert lab.dtype == torch.int64 and idx.dtype == torch.int64
            assert len(samples) == len(lab) == len(idx)
            seq.extend(idx.tolist())
            labels.extend(lab.tolist())
        out.append((seq, labels))
    return out


def reference(small_ds, memory, epochs, batch_size=32, seed=5):
    ld = hdmlp.Loader(small_ds.path, batch_size, memory, seed=seed, epochs=epochs)
    return epoch_sequences(ld, epochs)


@pytest.mark.parametrize("workers", [0, 1, 2, 4])
def test_dataloader_exactly_once_and_deterministic(worker_ds, workers):
    # a fixed cost model: bytes read then depend on the order alone, not on timings
    fixed = dict(epochs=3, storage_cost=(100, 1e9))
    ds = ht.HdmlpIterableDataset(worker_ds.path, 32, MEM, seed=5, with_indices=True, **fixed)
    assert len(ds) == (worker_ds.n + 31) // 32
    run1 = dl_epochs(ds, workers, 3)
    labels_of = hdmlp.Dataset(worker_ds.path).labels
    for seq, labels in run1:
        assert sorted(seq) == list(range(worker_ds.n))
        assert labels == [labels_of[i] for i in seq]
    assert run1[0][0] != run1[1][0]
    # the rank's one loader: bytes read per epoch are those of num_workers=0
    st = ds.stats()
    ds2 = ht.HdmlpIterableDataset(worker_ds.path, 32, MEM, seed=5, with_indices=True, **fixed)
    assert dl_epochs(ds2, workers, 3) == run1
    # W workers deliver exactly the sequence of one loader with the same memory
    memory = hdmlp.parse_memory(MEM, hdmlp.Dataset(worker_ds.path).raw_bytes)
    assert [s for s, _ in run1] == reference(worker_ds, memory, 3)
    ld = hdmlp.Loader(worker_ds.path, 32, memory, seed=5, **fixed)
    epoch_sequences(ld, 3)
    alone = ld.stats()
    assert st["chunk_loads"] == alone["chunk_loads"]
    assert abs(st["bytes_read"] - alone["bytes_read"]) <= 0.05 * alone["bytes_read"]


@pytest.mark.parametrize("persistent", [False, True])
def test_workers_advance_epochs_by_themselves(worker_ds, persistent):
    ds = ht.HdmlpIterableDataset(worker_ds.path, 32, MEM, seed=5, with_indices=True)
    run = dl_epochs(ds, 2, 3, set_epoch=False, persistent_workers=persistent)
    memory = hdmlp.parse_memory(MEM, hdmlp.Dataset(worker_ds.path).raw_bytes)
    assert [s for s, _ in run] == reference(worker_ds, memory, 3)
    st = ds.stats()
    assert st["epochs"] >= 3 and st["plane_arena_bytes"] > 0


def test_counting_dataloader_reports_batches_and_stall(worker_ds):
    ds = ht.HdmlpIterableDataset(worker_ds.path, 32, MEM, seed=5)
    dl = ht.DataLoader(ds, batch_size=None, num_workers=2)
    t0 = __import__("time").perf_counter()
    n = sum(1 for _ in dl)
    elapsed = __import__("time").perf_counter() - t0
    assert n == dl.batches_yielded == len(ds)
    assert 0 < dl.stall_seconds <= elapsed


def test_ragged_samples_cross_the_worker_queue_as_views_of_one_tensor(worker_ds):
    ds = ht.HdmlpIterableDataset(worker_ds.path, 32, MEM, seed=5, with_indices=True)
    got = {}
    for samples, _, idx in DataLoader(ds, batch_size=None, num_workers=2):
        assert isinstance(samples, list)
        if len({len(t) for t in samples}) > 1:
            base = samples[0].storage().data_ptr()
            assert all(t.storage().data_ptr() == base for t in samples)
        for t, i in zip(samples, idx.tolist()):
            got[i] = bytes(t.numpy())
    data = hdmlp.Dataset(worker_ds.path)
    assert len(got) == worker_ds.n
    assert all(got[i] == data.read(i) for i in range(0, worker_ds.n, 7))


def test_main_process_advances_epochs_and_honours_set_epoch(small_ds):
    ds = ht.HdmlpIterableDataset(small_ds.path, 32, MEM, seed=5, with_indices=True)
    ref = reference(small_ds, hdmlp.parse_memory(MEM, ds._dataset.raw_bytes), 4)
    got = dl_epochs(ds, 0, 2, set_epoch=False)
    assert [s for s, _ in got] == ref[:2]
    ds.set_epoch(3)
    assert [s for s, _ in dl_epochs(ds, 0, 1, set_epoch=False)] == [ref[3]]


def test_samples_are_zero_copy_tensor_views(small_ds):
    ds = ht.HdmlpIterableDataset(small_ds.path, 32, MEM, seed=5, collate=False)
    raw = hdmlp.Dataset(small_ds.path)
    ld = hdmlp.Loader(raw, 32, MEM, seed=5)
    batch = next(iter(ld))
    tensors = ht._as_tensors(batch)
    addrs = batch._addresses()
    for t, a, idx in zip(tensors, addrs, batch.indices):
        assert t.dtype == torch.uint8
        if t.numel():
            assert t.data_ptr() == a
        assert bytes(t.numpy()) == raw[idx]
    # the tensors keep the batch alive
    expect = [raw[i] for i in batch.indices]
    del batch
    for _ in range(5):
        next(iter(ld))
    assert [bytes(t.numpy()) for t in tensors] == expect
    samples, labels = next(iter(ds))
    assert isinstance(samples, list) and all(s.dtype == torch.uint8 for s in samples)


def test_equal_sizes_collate_into_one_tensor(fixed_ds):
    raw = hdmlp.Dataset(fixed_ds.path)
    ds = ht.HdmlpIterableDataset(fixed_ds.path, 10, "50%", seed=2, with_indices=True)
    samples, labels, idx = next(iter(ds))
    assert samples.shape == (10, 784) and samples.dtype == torch.uint8
    for row, i in zip(samples, idx.tolist()):
        assert bytes(row.numpy()) == raw[i]
    assert labels.tolist() == [raw.labels[i] for i in idx.tolist()]


def test_transform_runs_in_workers_and_stacks(fixed_ds):
    ds = ht.HdmlpIterableDataset(fixed_ds.path, 16, "50%", seed=2, with_indices=True,
                                 transform=lambda t: t.float().view(28, 28) / 255.0)
    dl = DataLoader(ds, batch_size=None, num_workers=2)
    seen = []
    for x, y, idx in dl:
        assert x.dtype == torch.float32 and x.shape[1:] == (28, 28)
        seen.extend(idx.tolist())
    assert sorted(seen) == list(range(fixed_ds.n))


def test_transform_with_pil_decode(tmp_path):
    PIL = pytest.importorskip("PIL.Image")
    from conftest import pack
    src = tmp_path / "png"
    for c in ("a", "b"):
        (src / c).mkdir(parents=True)
        for i in range(20):
            PIL.new("L", (8, 8), color=i * 10).save(src / c / f"{i}.png")
    out = pack(str(src), str(tmp_path / "png.hdmlp"), "--chunk-size", "4", "--seed", "1")

    def decode(t):
        img = PIL.open(io.BytesIO(t.numpy()))
        return torch.frombuffer(bytearray(img.tobytes()), dtype=torch.uint8).view(8, 8)

    ds = ht.HdmlpIterableDataset(out, 8, "1M", seed=1, transform=decode)
    n = 0
    for x, y in DataLoader(ds, batch_size=None):
        assert x.shape[1:] == (8, 8)
        n += len(y)
    assert n == 40


def test_rank_and_world_from_environment(small_ds, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert ht.rank_and_world() == (1, 2)
    # world > 1 without torch.distributed and without peers: a clear error
    with pytest.raises(ValueError, match="torch.distributed"):
        ht.HdmlpIterableDataset(small_ds.path, 32, MEM)
    ds = ht.HdmlpIterableDataset(small_ds.path, 32, MEM, peers=["127.0.0.1:1", "127.0.0.1:2"])
    assert (ds.rank, ds.world) == (1, 2)
    assert len(ds) == (small_ds.n // 2 + 31) // 32
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("WORLD_SIZE")
    assert ht.rank_and_world() == (0, 1)


def test_gathered_ports_stay_bound_until_every_rank_has_them(monkeypatch):
    # Ranks of one host pick their ports at the same time: a port released before the
    # gather could be picked again by the next rank (two ranks on one endpoint).
    import socket
    import torch.distributed as dist
    clashes = []

    def all_gather_object(out, mine):
        for ep in mine["endpoints"]:
            host, port = ep.rsplit(":", 1)
            with socket.socket() as s:
                try:
                    s.bind((host, int(port)))
                    clashes.append(ep)
                except OSError:
                    pass
        out[:] = [mine, dict(mine, endpoints=["10.0.0.2:1"] * len(mine["endpoints"]))]

    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "all_gather_object", all_gather_object)
    peers, _ = ht._gather_peers(0, 2, 2, 7, "127.0.0.1")
    assert not clashes, clashes
    assert len(peers) == 2 and peers[0][0] != peers[1][0] and peers[0][1] == "10.0.0.2:1"


DIST_CHILD = r"""
import json, os, sys
import torch.distributed as dist
from torch.utils.data import DataLoader
import hdmlp.torch as ht

dist.init_process_group("gloo")
path = sys.argv[1]
out = {"rank": dist.get_rank()}
for workers in (2, 0):  # forked workers first: gRPC must not be initialised before fork
    ds = ht.HdmlpIterableDataset(path, 32, "40%", seed=5, with_indices=True,
                                 num_workers=workers, epochs=2)
    dl = DataLoader(ds, batch_size=None, num_workers=workers, persistent_workers=workers > 0)
    seqs = []
    for epoch in range(2):
        ds.set_epoch(epoch)
        seqs.append([i for _, _, idx in dl for i in idx.tolist()])
        dist.barrier()  # ranks in step, as DDP training keeps them
    out[str(workers)] = seqs
    st = ds.stats()  # the rank's loader: its plane's with workers
    out["lent" + str(workers)] = [st["net_bytes_in"], st["net_bytes_lent"]]
    del dl
dist.barrier()
dist.destroy_process_group()
print(json.dumps(out), flush=True)
"""


def test_two_ranks_with_torch_distributed(small_ds):
    import json
    import socket
    import subprocess
    import sys
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(2):
        env = dict(__import__("os").environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   RANK=str(rank), WORLD_SIZE="2")
        procs.append(subprocess.Popen([sys.executable, "-c", DIST_CHILD, small_ds.path],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:  # a failed rank must not leave the other one waiting for it
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    results.sort(key=lambda r: r["rank"])
    for workers in ("0", "2"):
        for epoch in range(2):
            a, b = results[0][workers][epoch], results[1][workers][epoch]
            assert not set(a) & set(b), (workers, epoch)
            assert sorted(a + b) == list(range(small_ds.n)), (workers, epoch)
        assert results[0][workers][0] != results[0][workers][1]
    for r in results:  # one loader per rank: the order does not depend on the workers
        assert r["2"] == r["0"]
        for workers in ("0", "2"):  # ranks of one host lend their samples in shared memory
            got, lent = r["lent" + workers]
            assert 0 < lent <= got, (workers, got, lent)


def test_pickles_for_spawned_workers(small_ds):
    import pickle
    ds = ht.HdmlpIterableDataset(small_ds.path, 32, MEM, seed=5, with_indices=True)
    next(iter(ds))
    clone = pickle.loads(pickle.dumps(ds))
    a = [i for _, _, idx in clone for i in idx.tolist()]
    assert sorted(a) == list(range(small_ds.n))


def test_dataloader_batch_size_defaults_to_none_and_refuses_another(worker_ds):
    ds = ht.HdmlpIterableDataset(worker_ds.path, 16, MEM, seed=5, epochs=1, with_indices=True)
    samples, labels, idx = next(iter(ht.DataLoader(ds)))  # no batch_size: the dataset's
    assert len(samples) == len(labels) == len(idx) == 16
    with pytest.raises(ValueError, match=r"batch_size=16.*already yields batches of 16"):
        ht.DataLoader(ds, batch_size=16)
    with pytest.raises(ValueError, match="batch_size=1"):
        ht.DataLoader(ds, 1)
    # any other dataset keeps torch's default
    assert ht.DataLoader(list(range(3))).batch_size == 1


# set_epoch before each iteration (None: none): repeats, going back, and plain advancing
SET_EPOCH_PLAN = [0, 0, 2, 1, None, 3, 3, None]
SET_EPOCH_EPOCHS = [0, 0, 2, 1, 2, 3, 3, 4]  # the epoch each iteration delivers


def _set_epoch_run(path, workers, persistent=False, context=None, counting=True):
    ds = ht.HdmlpIterableDataset(path, 32, MEM, seed=5, with_indices=True)
    kwargs = dict(num_workers=workers, persistent_workers=persistent)
    if context is not None:
        kwargs["multiprocessing_context"] = context
    dl = (ht.DataLoader(ds, **kwargs) if counting else
          DataLoader(ds, batch_size=None, **kwargs))
    out = []
    for epoch in SET_EPOCH_PLAN:
        if epoch is not None:
            ds.set_epoch(epoch)
        out.append([i for _, _, idx in dl for i in idx.tolist()])
    return out


@pytest.mark.parametrize("workers, persistent, context, counting", [
    (2, True, None, True), (4, True, None, False), (2, False, None, True),
    (2, True, "forkserver", False)])
def test_set_epoch_with_workers_delivers_what_no_workers_does(fixed_ds, workers, persistent,
                                                               context, counting):
    # persistent workers used to ignore set_epoch: (0, 0) gave epochs 0, 1 and (2, 1) 2, 3
    memory = hdmlp.parse_memory(MEM, hdmlp.Dataset(fixed_ds.path).raw_bytes)
    ref = reference(fixed_ds, memory, max(SET_EPOCH_EPOCHS) + 1)
    alone = _set_epoch_run(fixed_ds.path, 0)
    assert alone == [ref[e] for e in SET_EPOCH_EPOCHS]
    assert _set_epoch_run(fixed_ds.path, workers, persistent, context, counting) == alone


@pytest.mark.parametrize("workers", [0, 2])
def test_iterating_past_epochs_raises_naming_epochs(fixed_ds, workers):
    ds = ht.HdmlpIterableDataset(fixed_ds.path, 32, MEM, seed=5, epochs=2)
    dl = ht.DataLoader(ds, num_workers=workers, persistent_workers=workers > 0)
    for _ in range(2):
        assert sum(len(y) for _, y in dl) == fixed_ds.n
    with pytest.raises(hdmlp.StateError, match=r"epochs=2"):  # not an empty epoch
        for _ in dl:
            pass
    with pytest.raises(hdmlp.InvalidArgumentError, match=r"epoch.*0\.\.1 \(epochs=2\)"):
        ds.set_epoch(2)


@pytest.mark.parametrize("workers", [0, 2])
def test_state_dict_epoch_is_the_epoch_the_next_iteration_delivers(fixed_ds, workers):
    ds = ht.HdmlpIterableDataset(fixed_ds.path, 32, MEM, seed=5, with_indices=True)
    dl = ht.DataLoader(ds, num_workers=workers, persistent_workers=workers > 0)
    ds.set_epoch(2)
    for _ in dl:
        pass
    for i, _ in enumerate(dl):  # epoch 3, three batches in
        if i == 2:
            break
    sd = ds.state_dict()
    # was the stale set_epoch (2) with workers, or None without
    assert sd["epoch"] == sd["loader"]["epoch"] == 3 and sd["set_epoch"] is None
    ds.set_epoch(5)
    sd = ds.state_dict()
    assert sd["epoch"] == sd["set_epoch"] == 5 and sd["loader"]["epoch"] == 3
    # a pending set_epoch travels with the state
    other = ht.HdmlpIterableDataset(fixed_ds.path, 32, MEM, seed=5, with_indices=True)
    other.load_state_dict(sd)
    memory = hdmlp.parse_memory(MEM, hdmlp.Dataset(fixed_ds.path).raw_bytes)
    got = [i for _, _, idx in ht.DataLoader(other) for i in idx.tolist()]
    assert got == reference(fixed_ds, memory, 6)[5]


def test_a_state_saved_before_set_epoch_had_its_key_still_loads(fixed_ds):
    ds = ht.HdmlpIterableDataset(fixed_ds.path, 32, MEM, seed=5, with_indices=True)
    next(iter(ds))
    sd = ds.state_dict()
    del sd["set_epoch"]
    sd["epoch"] = 4  # the pending set_epoch, as states of earlier versions held it
    other = ht.HdmlpIterableDataset(fixed_ds.path, 32, MEM, seed=5, with_indices=True)
    other.load_state_dict(sd)
    assert other.state_dict()["set_epoch"] == 4


def test_dataset_arguments_are_checked_at_construction(fixed_ds):
    # not at the first iteration inside a DataLoader worker
    for kwargs, param in [(dict(threads=0), "threads"), (dict(policy="lru"), "policy"),
                          (dict(batch_size=-1), "batch_size"), (dict(epochs=0), "epochs"),
                          (dict(order="loose"), "order")]:
        args = dict(batch_size=32, memory=MEM)
        args.update(kwargs)
        with pytest.raises(hdmlp.InvalidArgumentError, match=param):
            ht.HdmlpIterableDataset(fixed_ds.path, **args)
    with pytest.raises(TypeError, match="storage_cost"):
        ht.HdmlpIterableDataset(fixed_ds.path, 32, MEM, storage_cost="fast")


def test_unknown_dataset_keyword_is_named_with_the_close_match(fixed_ds):
    # was reported as a missing batch_size
    with pytest.raises(TypeError, match=r"'batchsize' \(did you mean 'batch_size'\?\)"):
        ht.HdmlpIterableDataset(fixed_ds.path, batchsize=32, memory=MEM)
    with pytest.raises(TypeError, match=r"'treads' \(did you mean 'threads'\?\)"):
        ht.HdmlpIterableDataset(fixed_ds.path, 32, MEM, treads=2)
    with pytest.raises(TypeError, match=r"'transfrom' \(did you mean 'transform'\?\)"):
        ht.HdmlpIterableDataset(fixed_ds.path, 32, MEM, transfrom=None)
    with pytest.raises(TypeError, match="load_state_dict"):
        ht.HdmlpIterableDataset(fixed_ds.path, 32, MEM, state={})
    with pytest.raises(TypeError, match="missing required argument 'memory'"):
        ht.HdmlpIterableDataset(fixed_ds.path, 32)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_loop_restarted_at_the_states_epoch_neither_repeats_nor_skips(fixed_ds, workers):
    memory = hdmlp.parse_memory(MEM, hdmlp.Dataset(fixed_ds.path).raw_bytes)
    ref = reference(fixed_ds, memory, 4)

    def make():
        ds = ht.HdmlpIterableDataset(fixed_ds.path, 32, MEM, seed=5, with_indices=True)
        return ds, ht.DataLoader(ds, num_workers=workers, persistent_workers=workers > 0)

    ds, dl = make()
    first = []
    for epoch in range(4):
        ds.set_epoch(epoch)
        for i, (_, _, idx) in enumerate(dl):
            first.extend(idx.tolist())
            if epoch == 2 and i == 4:
                break
        if epoch == 2:
            break
    sd = ds.state_dict()
    assert sd["epoch"] == 2
    ds, dl = make()
    dl.load_state_dict(sd)
    rest = []
    for epoch in range(sd["epoch"], 4):
        ds.set_epoch(epoch)
        rest.extend(i for _, _, idx in dl for i in idx.tolist())
    assert first + rest == [i for e in range(4) for i in ref[e]]


@pytest.mark.parametrize("workers", [0, 2])
def test_a_state_saved_after_a_complete_epoch_resumes_at_the_next(fixed_ds, workers):
    # The README's loop saves after each epoch: 'epoch' is then the next one (it was the
    # completed one, so the loop re-ran an empty epoch first, and a state saved after the
    # last epoch made the resumed loop iterate past the end)
    memory = hdmlp.parse_memory(MEM, hdmlp.Dataset(fixed_ds.path).raw_bytes)
    ref = reference(fixed_ds, memory, 3)

    def make():
        ds = ht.HdmlpIterableDataset(fixed_ds.path, 32, MEM, seed=5, epochs=3,
                                     with_indices=True)
        return ds, ht.DataLoader(ds, num_workers=workers, persistent_workers=workers > 0)

    for stop in (0, 2):
        ds, dl = make()
        got = []
        for epoch in range(stop + 1):
            ds.set_epoch(epoch)
            got.append([i for _, _, idx in dl for i in idx.tolist()])
        sd = dl.state_dict()
        assert sd["epoch"] == stop + 1 and sd["set_epoch"] is None
        ds, dl = make()
        dl.load_state_dict(sd)
        for epoch in range(sd["epoch"], 3):
            ds.set_epoch(epoch)
            got.append([i for _, _, idx in dl for i in idx.tolist()])
        assert got == ref[:3], f"stopped after epoch {stop}"
