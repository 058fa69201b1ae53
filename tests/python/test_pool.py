"""The pool order (order='pool'): exactly once, the C order, workers, ranks and resume."""
import os
import subprocess

import pytest

import hdmlp
from conftest import epoch_sequences, ranks_epoch_sequences, resume_at
from test_objstore import s3  # noqa: F401  (the S3 server fixture)

MEM = "25%"
BATCH = 32
SEED = 11
READS = 4  # K = 16 per chunk: units of 4 samples, so a chunk is read in 4 parts


def pool_loader(path, epochs=2, **kw):
    args = dict(seed=SEED, epochs=epochs, order="pool", pool_reads=READS)
    args.update(kw)
    return hdmlp.Loader(path, BATCH, MEM, **args)


def test_pool_is_exactly_once_reads_once_and_is_the_c_order(small_ds, tmp_path):
    ld = pool_loader(small_ds.path, epochs=3)
    seqs = epoch_sequences(ld, 3)
    for seq in seqs:
        assert sorted(seq) == list(range(small_ds.n))
    assert seqs[0] != seqs[1]
    st = ld.stats()
    assert st["order"] == 1 and st["pool_unit"] == 4
    # one pass: every unit once per epoch (2000 samples in 125 chunks of 16: 500 units)
    assert st["chunk_loads"] == 3 * 500
    strict = epoch_sequences(hdmlp.Loader(small_ds.path, BATCH, MEM, seed=SEED, epochs=3), 3)
    assert strict != seqs
    # hdmlp-bench and the Python binding deliver the same order
    ids = tmp_path / "ids.txt"
    subprocess.run([os.environ["HDMLP_BENCH"], small_ds.path, "--memory",
                    str(hdmlp.parse_memory(MEM, hdmlp.Dataset(small_ds.path).raw_bytes)),
                    "--batch", str(BATCH), "--epochs", "3", "--seed", str(SEED), "--order",
                    "pool", "--pool-reads", str(READS), "--ids", str(ids), "--quiet"],
                   check=True, timeout=60)
    assert [[int(x) for x in line.split()] for line in ids.read_text().splitlines()] == seqs
    # relaxed=True is the pool order's former name
    alias = hdmlp.Loader(small_ds.path, BATCH, MEM, seed=SEED, epochs=3, relaxed=True,
                         pool_reads=READS)
    assert epoch_sequences(alias, 3) == seqs


def test_pool_arguments_are_checked(small_ds):
    with pytest.raises(ValueError, match="order"):
        hdmlp.Loader(small_ds.path, BATCH, MEM, order="shuffled")
    for bad in (-1, 65537, 2.5, "4"):
        with pytest.raises(ValueError, match="pool_reads"):
            hdmlp.Loader(small_ds.path, BATCH, MEM, order="pool", pool_reads=bad)
    with pytest.raises(ValueError, match="relaxed"):
        hdmlp.Loader(small_ds.path, BATCH, MEM, order="strict", relaxed=True)


@pytest.mark.parametrize("cut", [1, 40, 63, 100])
def test_pool_resume_matches_an_uninterrupted_run(small_ds, cut):
    ref = [i for seq in epoch_sequences(pool_loader(small_ds.path), 2) for i in seq]
    got, sd = resume_at(lambda **kw: pool_loader(small_ds.path, **kw), cut * BATCH)
    assert got == ref, f"cut {cut}"
    # a state of the other order, or of another read unit, is refused by name
    with pytest.raises(ValueError, match="order"):
        hdmlp.Loader(small_ds.path, BATCH, MEM, seed=SEED, epochs=2, state=sd)
    with pytest.raises(ValueError, match="pool read unit"):
        pool_loader(small_ds.path, state=sd, pool_reads=2)


@pytest.mark.parametrize("world", [2, 3])
def test_pool_ranks_exchange_and_deliver_each_sample_once(small_ds, world):
    def make(r, w, peers):
        return pool_loader(small_ds.path, rank=r, world=w, peers=peers, job_token=3,
                           peer_timeout=20)

    out = ranks_epoch_sequences(make, world)
    for e in range(2):
        lens = {len(out[r][e]) for r in range(world)}
        assert max(lens) - min(lens) <= 1  # equal shares (N % world ranks get one more)
        assert sorted(i for r in range(world) for i in out[r][e]) == list(range(small_ds.n))


@pytest.mark.parametrize("workers", [2, 4])
def test_pool_through_dataloader_workers_is_the_no_worker_sequence(worker_ds, workers):
    torch = pytest.importorskip("torch")
    import hdmlp.torch as ht
    kw = dict(seed=SEED, epochs=2, with_indices=True, order="pool", pool_reads=READS)
    seqs = {}
    for w in (0, workers):
        ds = ht.HdmlpIterableDataset(worker_ds.path, BATCH, MEM, num_workers=w, **kw)
        dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=w)
        seqs[w] = []
        for e in range(2):
            ds.set_epoch(e)
            seqs[w].append([i for _, _, idx in dl for i in idx.tolist()])
    for seq in seqs[0]:
        assert sorted(seq) == list(range(worker_ds.n))
    assert seqs[workers] == seqs[0]


def test_pool_over_s3_is_the_local_pool_order(s3, small_ds):
    kw = dict(batch_size=32, memory=small_ds.raw_bytes // 4, seed=5, epochs=2, order="pool",
              pool_reads=READS)
    remote = epoch_sequences(hdmlp.Loader(hdmlp.Dataset("s3://bucket/small"), **kw), 2)
    local = epoch_sequences(hdmlp.Loader(small_ds.path, **kw), 2)
    assert remote == local
    for seq in remote:
        assert sorted(seq) == list(range(small_ds.n))
