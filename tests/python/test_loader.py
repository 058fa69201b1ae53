"""hdmlp.Loader: exactly-once, determinism, agreement with the C API, epochs, stats."""
import os
import subprocess
import threading

import pytest

import hdmlp
from conftest import epoch_sequences, stats_fields, tool

MEM = "40%"


def test_each_epoch_delivers_every_sample_once(small_ds):
    ds = hdmlp.Dataset(small_ds.path)
    ld = hdmlp.Loader(ds, 32, MEM, seed=5, epochs=3)
    assert len(ld) == (small_ds.n + 31) // 32
    seqs = epoch_sequences(ld, 3)
    for e, seq in enumerate(seqs):
        assert sorted(seq) == list(range(small_ds.n)), f"epoch {e}"
    assert seqs[0] != seqs[1] != seqs[2]
    with pytest.raises(hdmlp.StateError, match="epochs=3"):  # not an empty epoch
        list(ld)
    st = ld.stats()
    assert st["samples"] == 3 * small_ds.n and st["epochs"] == 3


def test_batches_carry_correct_bytes_labels_and_epoch(small_ds):
    ds = hdmlp.Dataset(small_ds.path)
    labels = ds.labels
    ld = hdmlp.Loader(ds, 50, MEM, seed=2, epochs=2)
    for e in range(2):
        for batch in ld:
            assert batch.epoch == e
            assert len(batch) == len(batch.samples) == len(batch.labels) == len(batch.indices)
            for view, idx, lab in zip(batch.samples, batch.indices, batch.labels):
                assert view.readonly
                assert bytes(view) == ds[idx]
                assert lab == labels[idx]


def test_same_config_same_order_other_seed_other_order(small_ds):
    a = epoch_sequences(hdmlp.Loader(small_ds.path, 16, MEM, seed=9, epochs=2), 2)
    b = epoch_sequences(hdmlp.Loader(small_ds.path, 16, MEM, seed=9, epochs=2), 2)
    c = epoch_sequences(hdmlp.Loader(small_ds.path, 16, MEM, seed=10, epochs=2), 2)
    assert a == b
    assert a != c
    # the I/O engine and the refill mode do not change the order
    d = epoch_sequences(hdmlp.Loader(small_ds.path, 16, MEM, seed=9, epochs=2,
                                     engine="pread", refill="whole"), 2)
    assert d == a
    # nor does timing: more threads, same order on every run
    e = [epoch_sequences(hdmlp.Loader(small_ds.path, 16, MEM, seed=9, epochs=2, threads=4), 2)
         for _ in range(2)]
    assert e[0] == e[1]


def test_matches_hdmlp_bench_ids(small_ds, tmp_path):
    bench = tool("hdmlp-bench")
    ds = hdmlp.Dataset(small_ds.path)
    memory = hdmlp.parse_memory(MEM, ds.raw_bytes)
    for batch_size, seed, drop in ((32, 7, False), (100, 123, True)):
        ids = tmp_path / f"ids-{seed}.txt"
        cmd = [bench, small_ds.path, "--memory", str(memory), "--batch", str(batch_size),
               "--epochs", "3", "--seed", str(seed), "--ids", str(ids), "--quiet"]
        if drop:
            cmd.append("--drop-last")
        subprocess.run(cmd, check=True, timeout=60)
        expect = [[int(x) for x in line.split()] for line in ids.read_text().splitlines()]
        ld = hdmlp.Loader(ds, batch_size, memory, seed=seed, epochs=3, drop_last=drop)
        assert epoch_sequences(ld, 3) == expect


def test_relaxed_reads_less_and_still_delivers_each_sample_once(small_ds):
    runs = {}
    for relaxed in (False, True):
        ld = hdmlp.Loader(small_ds.path, 16, "25%", seed=4, epochs=2, refill="whole",
                          storage_cost=(100, 1e9), relaxed=relaxed)
        seqs = epoch_sequences(ld, 2)
        for seq in seqs:
            assert sorted(seq) == list(range(small_ds.n))
        runs[relaxed] = (seqs, ld.stats()["chunk_loads"])
    assert runs[True][0] != runs[False][0]  # another order
    assert runs[True][1] < runs[False][1]  # fewer chunk loads
    with pytest.raises(TypeError):
        hdmlp.Loader(small_ds.path, 16, "25%", relaxed=object.__new__(_NoTruth))


class _NoTruth:
    def __bool__(self):
        raise TypeError("no truth value")


def test_drop_last(small_ds):
    ld = hdmlp.Loader(small_ds.path, 64, MEM, seed=1, epochs=2, drop_last=True)
    assert len(ld) == small_ds.n // 64
    for seq in epoch_sequences(ld, 2):
        assert len(seq) == (small_ds.n // 64) * 64 and len(set(seq)) == len(seq)


def test_unbounded_epochs_and_next_batch(small_ds):
    ld = hdmlp.Loader(small_ds.path, 64, MEM, seed=1)
    assert ld.epochs is None
    ref = epoch_sequences(hdmlp.Loader(small_ds.path, 64, MEM, seed=1, epochs=5), 5)
    got = epoch_sequences(ld, 4)
    assert got == ref[:4]
    b = ld.next_batch()
    assert b.epoch == 4 and list(b.indices) == ref[4][:64]
    ld2 = hdmlp.Loader(small_ds.path, 64, MEM, seed=1, epochs=1)
    n = 0
    while (b := ld2.next_batch()) is not None:
        n += len(b)
    assert n == small_ds.n and ld2.next_batch() is None


def test_break_then_iterate_starts_the_next_epoch(small_ds):
    ref = epoch_sequences(hdmlp.Loader(small_ds.path, 32, MEM, seed=4, epochs=3), 3)
    ld = hdmlp.Loader(small_ds.path, 32, MEM, seed=4, epochs=3)
    it = iter(ld)
    first = next(it)
    assert list(first.indices) == ref[0][:32]
    assert ld.epoch == 1  # the rest of epoch 0 is abandoned by the next iter()
    assert epoch_sequences(ld, 1) == [ref[1]]
    assert ld.drained_batches == len(ld) - 1
    with pytest.raises(hdmlp.StateError, match="superseded"):
        next(it)


def test_iterating_past_the_configured_epochs_raises_naming_epochs(small_ds):
    # a range(5) loop over epochs=3 used to train on two empty epochs without a word
    ld = hdmlp.Loader(small_ds.path, 64, MEM, seed=1, epochs=3)
    got = epoch_sequences(ld, 3)
    assert all(sorted(seq) == list(range(small_ds.n)) for seq in got)
    for _ in range(2):  # every further iteration, not only the first
        with pytest.raises(hdmlp.StateError, match=r"epoch 3 .*epochs=3 \(epochs 0\.\.2\)"):
            iter(ld)
    assert ld.next_batch() is None  # the stream's own end is still None
    ld.set_epoch(2)  # an earlier epoch is still there
    assert epoch_sequences(ld, 1) == [got[2]]


def test_set_epoch_forward_and_back(small_ds):
    ref = epoch_sequences(hdmlp.Loader(small_ds.path, 32, MEM, seed=8, epochs=4), 4)
    ld = hdmlp.Loader(small_ds.path, 32, MEM, seed=8, epochs=4)
    ld.set_epoch(2)
    assert ld.epoch == 2
    assert epoch_sequences(ld, 1) == [ref[2]]
    ld.set_epoch(1)  # backwards: recreates the C loader
    assert epoch_sequences(ld, 1) == [ref[1]]
    assert ld.restarts == 1
    ld.set_epoch(2)  # the next epoch anyway: no cost
    assert epoch_sequences(ld, 1) == [ref[2]]
    with pytest.raises(hdmlp.InvalidArgumentError, match="epoch"):
        ld.set_epoch(4)


def test_memory_strings(small_ds):
    ds = hdmlp.Dataset(small_ds.path)
    assert hdmlp.parse_memory(123456) == 123456
    assert hdmlp.parse_memory("256M") == 256 << 20
    assert hdmlp.parse_memory("1.5GiB") == 3 << 29
    assert hdmlp.parse_memory("500MB") == 500_000_000
    assert hdmlp.parse_memory("2k") == 2048
    assert hdmlp.parse_memory("25%", 1000) == 250
    ld = hdmlp.Loader(ds, 32, "50%")
    assert ld.memory == ds.raw_bytes // 2
    assert ld.stats()["memory_budget"] == ld.memory
    for bad in ("", "12X", "-5M", "%", "0%", "abc"):
        with pytest.raises(hdmlp.InvalidArgumentError, match="memory"):
            hdmlp.parse_memory(bad, 100)
    with pytest.raises(TypeError, match="memory"):
        hdmlp.Loader(ds, 32, 1.5e6)


def test_stats_keys_are_the_c_struct_fields(small_ds):
    ld = hdmlp.Loader(small_ds.path, 32, MEM, seed=1, epochs=1)
    for _ in ld:
        pass
    st = ld.stats()
    assert list(st) == stats_fields()
    assert len(st["fill_hist"]) == 11
    assert st["samples"] == small_ds.n
    assert st["bytes_delivered"] == small_ds.raw_bytes
    assert st["peak_memory_bytes"] <= st["memory_budget"]


def test_loader_accepts_a_path_and_keeps_the_dataset_open(small_ds):
    ld = hdmlp.Loader(small_ds.path, 32, MEM)
    assert isinstance(ld.dataset, hdmlp.Dataset) and len(ld.dataset) == small_ds.n
    assert sorted(epoch_sequences(ld, 1)[0]) == list(range(small_ds.n))


def test_closed_loader(small_ds):
    ld = hdmlp.Loader(small_ds.path, 32, MEM)
    with ld:
        pass
    assert ld.closed
    with pytest.raises(hdmlp.StateError, match="closed"):
        iter(ld)
    with pytest.raises(hdmlp.StateError, match="closed"):
        ld.stats()
    ld.close()


def test_loader_is_not_usable_after_fork(small_ds):
    if not hasattr(os, "fork"):
        pytest.skip("no fork")
    ld = hdmlp.Loader(small_ds.path, 32, MEM, seed=1)
    next(iter(ld))
    pid = os.fork()
    if pid == 0:  # child: must refuse, and must not hang or crash on exit
        code = 1
        try:
            ld.next_batch()
        except hdmlp.StateError as e:
            code = 0 if "another process" in str(e) else 2
        finally:
            del ld
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert ld.next_batch() is not None  # the parent's loader is untouched


def free_port():
    from hdmlp.torch import _bound_port  # below the ephemeral range, as hdmlp.torch picks
    with _bound_port("127.0.0.1") as s:
        return s.getsockname()[1]


def test_two_ranks_in_one_process_split_each_epoch(small_ds):
    peers = [f"127.0.0.1:{free_port()}" for _ in range(2)]
    ds = hdmlp.Dataset(small_ds.path)
    out, errors = {}, []

    def rank(r):
        try:
            with hdmlp.Loader(ds, 32, MEM, seed=3, epochs=2, rank=r, world=2, peers=peers,
                              job_token=99, peer_timeout=20) as ld:
                assert ld.samples_per_epoch == small_ds.n // 2 + (r < small_ds.n % 2)
                out[r] = (epoch_sequences(ld, 2), ld.stats())
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    for e in range(2):
        a, b = out[0][0][e], out[1][0][e]
        assert not set(a) & set(b)
        assert sorted(a + b) == list(range(small_ds.n))
    assert out[0][1]["net_bytes_in"] + out[1][1]["net_bytes_in"] > 0


def test_io_mode_and_cost_learning_in_stats(small_ds):
    # Default: the loader chooses (a small dataset fits the page cache: buffered) and
    # learns its storage's cost from its reads.
    ld = hdmlp.Loader(small_ds.path, 32, MEM, seed=1, epochs=1)
    for _ in ld:
        pass
    st = ld.stats()
    assert st["direct_io"] == 0 and st["page_cache_room"] > 0
    assert st["cost_learning"] == 1 and st["cost_reads"] > 0
    assert st["budget_slots"] > 0
    for value, want in ((True, 1), (False, 0), ("auto", 0), (None, 0)):
        ld = hdmlp.Loader(small_ds.path, 32, MEM, seed=1, epochs=1, direct_io=value)
        assert ld.stats()["direct_io"] == want, value
    # A fixed cost model is not learnt.
    ld = hdmlp.Loader(small_ds.path, 32, MEM, seed=1, epochs=1, storage_cost=(500, 2e8))
    for _ in ld:
        pass
    st = ld.stats()
    assert st["cost_learning"] == 0 and st["cost_reads"] == 0
    assert st["source_op_ns"] == 500000
