"""The strict order's clairvoyant policy through the loader: what 'auto' picks, exactly once,
the C order, resume, ranks and workers (the forecast's agreement is in test_forecast.c)."""
import os
import subprocess

import pytest

import hdmlp
from conftest import epoch_sequences, ranks_epoch_sequences, resume_at, pack, write_tree

MEM = "25%"
BATCH = 32
SEED = 11
FILL_RATE, CLAIRVOYANT = 0, 2


def cv_loader(path, epochs=2, **kw):
    args = dict(seed=SEED, epochs=epochs, policy="clairvoyant")
    args.update(kw)
    return hdmlp.Loader(path, BATCH, MEM, **args)


@pytest.fixture(scope="module")
def big_chunks(tmp_root):
    """256 samples of 40-48 KiB, 128 per chunk: chunks of more than 4 MiB."""
    src = os.path.join(tmp_root, "bigchunk-src")
    write_tree(src, 256, lambda r, i: r.randint(40 << 10, 48 << 10))
    return pack(src, os.path.join(tmp_root, "bigchunk.hdmlp"), "--chunk-size", "128",
                "--seed", "5", "--compress", "none")


def test_auto_is_clairvoyant_for_chunks_over_a_request_and_fill_rate_below(small_ds,
                                                                          big_chunks):
    small = hdmlp.Loader(small_ds.path, BATCH, MEM, seed=SEED, epochs=1)
    assert small.stats()["policy"] == FILL_RATE  # 16 samples of <= 3 KB a chunk
    big = hdmlp.Loader(big_chunks, 8, "200%", seed=SEED, epochs=2)
    assert big.stats()["policy"] == CLAIRVOYANT
    seqs = epoch_sequences(big, 2)
    explicit = epoch_sequences(hdmlp.Loader(big_chunks, 8, "200%", seed=SEED, epochs=2,
                                            policy="clairvoyant"), 2)
    assert seqs == explicit
    fill = hdmlp.Loader(big_chunks, 8, "200%", seed=SEED, epochs=2, policy="fill-rate")
    assert fill.stats()["policy"] == FILL_RATE
    assert epoch_sequences(fill, 2) != seqs
    with pytest.raises(ValueError, match="policy"):
        hdmlp.Loader(small_ds.path, BATCH, MEM, policy="belady")


def test_clairvoyant_is_exactly_once_and_the_c_order(small_ds, tmp_path):
    ld = cv_loader(small_ds.path, epochs=3)
    seqs = epoch_sequences(ld, 3)
    for seq in seqs:
        assert sorted(seq) == list(range(small_ds.n))
    assert len({tuple(s) for s in seqs}) == 3
    st = ld.stats()
    assert st["policy"] == CLAIRVOYANT and st["samples_filled"] == 3 * small_ds.n
    fill = epoch_sequences(hdmlp.Loader(small_ds.path, BATCH, MEM, seed=SEED, epochs=3), 3)
    assert fill != seqs
    ids = tmp_path / "ids.txt"
    subprocess.run([os.environ["HDMLP_BENCH"], small_ds.path, "--memory",
                    str(hdmlp.parse_memory(MEM, hdmlp.Dataset(small_ds.path).raw_bytes)),
                    "--batch", str(BATCH), "--epochs", "3", "--seed", str(SEED), "--policy",
                    "clairvoyant", "--ids", str(ids), "--quiet"], check=True, timeout=60)
    assert [[int(x) for x in line.split()] for line in ids.read_text().splitlines()] == seqs


@pytest.mark.parametrize("cut", [1, 40, 63, 100])
def test_clairvoyant_resume_matches_an_uninterrupted_run(small_ds, cut):
    ref = [i for seq in epoch_sequences(cv_loader(small_ds.path), 2) for i in seq]
    got, sd = resume_at(lambda **kw: cv_loader(small_ds.path, **kw), cut * BATCH)
    assert got == ref, f"cut {cut}"
    # a fill-rate loader does not continue a clairvoyant state (another order)
    with pytest.raises(ValueError, match="policy"):
        cv_loader(small_ds.path, state=sd, policy="fill-rate")


@pytest.mark.parametrize("world", [2, 3])
def test_clairvoyant_ranks_exchange_and_deliver_each_sample_once(small_ds, world):
    def make(r, w, peers):
        return cv_loader(small_ds.path, rank=r, world=w, peers=peers, job_token=5,
                         peer_timeout=20)

    out = ranks_epoch_sequences(make, world)
    for e in range(2):
        lens = {len(out[r][e]) for r in range(world)}
        assert max(lens) - min(lens) <= 1
        assert sorted(i for r in range(world) for i in out[r][e]) == list(range(small_ds.n))


def test_clairvoyant_through_dataloader_workers_is_the_no_worker_sequence(worker_ds):
    torch = pytest.importorskip("torch")
    import hdmlp.torch as ht
    kw = dict(seed=SEED, epochs=2, with_indices=True, policy="clairvoyant")
    seqs = {}
    for w in (0, 2):
        ds = ht.HdmlpIterableDataset(worker_ds.path, BATCH, MEM, num_workers=w, **kw)
        dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=w)
        seqs[w] = []
        for e in range(2):
            ds.set_epoch(e)
            seqs[w].append([i for _, _, idx in dl for i in idx.tolist()])
    for seq in seqs[0]:
        assert sorted(seq) == list(range(worker_ds.n))
    assert seqs[2] == seqs[0]
