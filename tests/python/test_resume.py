"""Exact resume from Python (Loader.state_dict / load_state_dict / state=, and the hdmlp.torch
dataset), including processes killed with SIGKILL after saving, one and two ranks; states
from another dataset or configuration refused with the error hierarchy."""
import json
import os
import pickle
import signal
import subprocess
import sys
import threading

import pytest

import hdmlp
from conftest import SOURCE_DIR

MEM = "40%"
BATCH = 32
EPOCHS = 3
SEED = 5

# A child process: iterates a loader (hdmlp.Loader, or the hdmlp.torch dataset through a
# DataLoader with num_workers=0), optionally resuming from a pickled state; after `stop`
# batches it writes its deliveries and the state (atomically), prints SAVED and carries on
# until it is killed. Without `stop` it runs to the end and writes its deliveries.
CHILD = r"""
import json, os, pickle, sys, time
import hdmlp
a = json.loads(sys.argv[1])
got, n = [], 0
saved_epoch = 0
resume = None
if a.get("state_in"):
    with open(a["state_in"], "rb") as f:
        rec = pickle.load(f)
    resume, saved_epoch = rec["state"], rec["epoch"]

def save(state, epoch):
    tmp = a["out"] + ".tmp"
    with open(tmp, "wb") as f:
        pickle.dump({"indices": got, "state": state, "epoch": epoch}, f)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, a["out"])
    print("SAVED", flush=True)

def after_batch(state_fn, epoch):
    global n
    n += 1
    if a.get("stop") == n:
        save(state_fn(), epoch)
        if a["world"] > 1:
            time.sleep(600)  # peers are killed together
    elif a.get("stop") is not None and n > a["stop"]:
        time.sleep(0.02)  # deliveries after the save are lost with the process

kw = dict(seed=a["seed"], rank=a["rank"], world=a["world"], epochs=a["epochs"])
if a["world"] > 1:
    kw.update(peers=a["peers"], job_token=4242, peer_timeout=20)
if a["api"] == "loader":
    if a["world"] > 1 and resume is not None:
        kw["state"] = resume  # a running rank already talks to its peers
    ld = hdmlp.Loader(a["path"], a["batch"], a["memory"], **kw)
    if resume is not None and "state" not in kw:
        ld.load_state_dict(resume)
    for epoch in range(saved_epoch, a["epochs"]):
        ld.set_epoch(epoch)
        for b in ld:
            got.extend(b.indices)
            del b
            after_batch(ld.state_dict, epoch)
    ld.close()
else:
    import torch
    import hdmlp.torch as ht
    ds = ht.HdmlpIterableDataset(a["path"], a["batch"], a["memory"], with_indices=True, **kw)
    if resume is not None:
        ds.load_state_dict(resume)
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    for epoch in range(saved_epoch, a["epochs"]):
        ds.set_epoch(epoch)
        for samples, labels, idx in dl:
            got.extend(idx.tolist())
            after_batch(ds.state_dict, epoch)
if a.get("stop") is None:
    with open(a["out"], "wb") as f:
        pickle.dump({"indices": got}, f)
"""


def free_port():
    from hdmlp.torch import _bound_port  # below the ephemeral range, as hdmlp.torch picks
    with _bound_port("127.0.0.1") as s:
        return s.getsockname()[1]


def child_args(path, out, **over):
    a = {"path": path, "batch": BATCH, "memory": MEM, "seed": SEED, "epochs": EPOCHS,
         "rank": 0, "world": 1, "api": "loader", "out": str(out)}
    a.update(over)
    return a


def start(args):
    return subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_saved_then_kill(procs):
    """Waits for every child's SAVED line, then SIGKILLs them all."""
    for p in procs:
        line = p.stdout.readline()
        if line.strip() != "SAVED":
            p.kill()
            _, err = p.communicate(timeout=30)
            pytest.fail(f"child did not save: {line!r} {err}")
    for p in procs:
        p.send_signal(signal.SIGKILL)
    for p in procs:
        p.communicate(timeout=30)
        assert p.returncode == -signal.SIGKILL


def finish(procs):
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err


def load(path):
    with open(path, "rb") as f:
        return pickle.load(f)


def reference(path, **kw):
    """Every index one loader delivers over EPOCHS epochs, in order."""
    out = []
    ld = hdmlp.Loader(path, BATCH, MEM, seed=SEED, epochs=EPOCHS, **kw)
    for _ in range(EPOCHS):
        for b in ld:
            out.extend(b.indices)
    return out


def batches_per_epoch(n, world=1, rank=0):
    per = n // world + (rank < n % world)
    return -(-per // BATCH)


# ---- in-process ----------------------------------------------------------------------------

def test_state_dict_is_small_picklable_and_versioned(small_ds):
    ld = hdmlp.Loader(small_ds.path, BATCH, MEM, seed=SEED, epochs=EPOCHS)
    it = iter(ld)
    for _ in range(3):
        next(it)
    sd = ld.state_dict()
    assert sd["format"] == "hdmlp.Loader" and sd["version"] == 1
    assert (sd["epoch"], sd["batch"]) == (0, 3)
    assert isinstance(sd["state"], bytes) and 0 < len(sd["state"]) <= hdmlp.STATE_MAX
    assert pickle.loads(pickle.dumps(sd)) == sd
    assert len(pickle.dumps(sd)) < 512


@pytest.mark.parametrize("cut", [0, 1, 30, 63, 64, 65, 150])
def test_resume_in_process_matches_an_uninterrupted_run(small_ds, cut):
    ref = reference(small_ds.path)
    nb = batches_per_epoch(small_ds.n)
    assert nb == 63
    ld = hdmlp.Loader(small_ds.path, BATCH, MEM, seed=SEED, epochs=EPOCHS)
    got = []
    while len(got) < cut * BATCH and (b := ld.next_batch()) is not None:
        got.extend(b.indices)
    sd = pickle.loads(pickle.dumps(ld.state_dict()))
    ld.close()
    # both ways in: load_state_dict on a fresh loader, and the state= argument
    for how in ("load", "ctor"):
        if how == "load":
            again = hdmlp.Loader(small_ds.path, BATCH, MEM, seed=SEED, epochs=EPOCHS)
            again.load_state_dict(sd)
        else:
            again = hdmlp.Loader(small_ds.path, BATCH, MEM, seed=SEED, epochs=EPOCHS, state=sd)
        assert again.state_dict() == sd  # nothing taken yet: the same position
        rest = []
        while again.epoch < EPOCHS:
            for b in again:
                rest.extend(b.indices)
        assert got + rest == ref, f"cut {cut} ({how})"
        assert again.stats()["samples"] == len(rest)


@pytest.mark.parametrize("drop_last", [False, True])
def test_saved_after_an_epochs_last_batch_neither_repeats_nor_skips(small_ds, drop_last):
    """Saved inside the loop body after the last batch: re-entering that epoch after the
    resume ends it at once, and the next epoch follows."""
    kw = dict(drop_last=drop_last)
    ref = reference(small_ds.path, **kw)
    ld = hdmlp.Loader(small_ds.path, BATCH, MEM, seed=SEED, epochs=EPOCHS, **kw)
    got, sd = [], None
    for b in ld:
        got.extend(b.indices)
        sd = ld.state_dict()  # the last one is taken after the epoch's last batch
    nb = small_ds.n // BATCH if drop_last else batches_per_epoch(small_ds.n)
    assert (sd["epoch"], sd["batch"]) == (0, nb)
    assert ld.state_dict()["epoch"] == 1 and ld.state_dict()["batch"] == 0  # loop ended
    again = hdmlp.Loader(small_ds.path, BATCH, MEM, seed=SEED, epochs=EPOCHS, state=sd, **kw)
    assert again.epoch == 0
    again.set_epoch(0)
    assert list(again) == []  # the rest of epoch 0: nothing
    for e in (1, 2):
        again.set_epoch(e)
        for b in again:
            assert b.epoch == e
            got.extend(b.indices)
    assert got == ref
    # saved after the loop over epoch 0 ended: the next iteration is epoch 1
    after = ld.state_dict()
    again = hdmlp.Loader(small_ds.path, BATCH, MEM, seed=SEED, epochs=EPOCHS, state=after, **kw)
    assert again.epoch == 1
    assert [i for b in again for i in b.indices] == ref[len(ref) // 3:2 * len(ref) // 3]


def test_resume_then_set_epoch_forward_and_back(small_ds):
    ref = reference(small_ds.path)
    nb = batches_per_epoch(small_ds.n)
    ld = hdmlp.Loader(small_ds.path, BATCH, MEM, seed=SEED, epochs=EPOCHS)
    for _ in range(10):
        ld.next_batch()
    sd = ld.state_dict()
    again = hdmlp.Loader(small_ds.path, BATCH, MEM, seed=SEED, epochs=EPOCHS, state=sd)
    n = small_ds.n
    again.set_epoch(2)  # skips the rest of epoch 0 and epoch 1
    assert [i for b in again for i in b.indices] == ref[2 * n:]
    assert again.drained_batches == 2 * nb - 10
    again.set_epoch(0)  # back: starts over from the beginning, not from the state
    assert [i for b in again for i in b.indices] == ref[:n]
    assert again.restarts == 1


def test_resume_with_drop_last_and_skip_mode(small_ds):
    kw = dict(drop_last=True, on_corrupt="skip")
    ref = reference(small_ds.path, **kw)
    ld = hdmlp.Loader(small_ds.path, BATCH, MEM, seed=SEED, epochs=EPOCHS, **kw)
    got = []
    for _ in range(70):
        got.extend(ld.next_batch().indices)
    again = hdmlp.Loader(small_ds.path, BATCH, MEM, seed=SEED, epochs=EPOCHS,
                         state=ld.state_dict(), **kw)
    while (b := again.next_batch()) is not None:
        got.extend(b.indices)
    assert got == ref


def test_two_ranks_in_threads_resume_exactly(small_ds):
    """Both ranks save after the same number of batches; new loaders (state=) continue."""
    ds = hdmlp.Dataset(small_ds.path)

    def run(cut, states):
        peers = [f"127.0.0.1:{free_port()}" for _ in range(2)]
        out, saved, errors = {}, {}, []

        def rank(r):
            try:
                kw = dict(seed=SEED, epochs=EPOCHS, rank=r, world=2, peers=peers, job_token=9,
                          peer_timeout=20)
                if states:
                    kw["state"] = states[r]
                with hdmlp.Loader(ds, BATCH, MEM, **kw) as ld:
                    seq = []
                    while ((cut is None or len(seq) < cut) and
                           (b := ld.next_batch()) is not None):
                        seq.append(list(b.indices))
                    if cut is not None:
                        saved[r] = ld.state_dict()
                        while ld.next_batch() is not None:  # run to the end: peers need it
                            pass
                    out[r] = seq
            except BaseException as e:  # reported by the main thread
                errors.append(e)

        threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors
        return out, saved

    full, _ = run(None, None)
    for cut in (17, 40):
        first, states = run(cut, None)
        rest, _ = run(None, states)
        for r in range(2):
            assert first[r] + rest[r] == full[r], f"rank {r}, cut {cut}"


# ---- refused states, error hierarchy -----------------------------------------------------

def saved_state(path, **kw):
    ld = hdmlp.Loader(path, BATCH, MEM, seed=SEED, epochs=EPOCHS, **kw)
    for _ in range(5):
        ld.next_batch()
    return ld.state_dict()


def expect_refused(path, sd, field, batch=BATCH, memory=MEM, **kw):
    args = dict(seed=SEED, epochs=EPOCHS)
    args.update(kw)
    with pytest.raises(hdmlp.InvalidArgumentError) as ei:
        hdmlp.Loader(path, batch, memory, state=sd, **args)
    e = ei.value
    assert isinstance(e, ValueError) and isinstance(e, hdmlp.Error)
    assert e.code == hdmlp.E_INVAL and e.name == "HDMLP_E_INVAL"
    assert field in str(e) and field in e.detail, str(e)
    # load_state_dict refuses the same way and leaves the loader usable from the start
    ld = hdmlp.Loader(path, batch, memory, **args)
    with pytest.raises(ValueError, match=field):
        ld.load_state_dict(sd)
    assert ld.position == (0, 0) and ld.next_batch() is not None


def test_state_of_another_dataset_or_config_is_refused(small_ds, fixed_ds):
    sd = saved_state(small_ds.path)
    expect_refused(fixed_ds.path, sd, "dataset id")
    expect_refused(small_ds.path, sd, "seed", seed=SEED + 1)
    expect_refused(small_ds.path, sd, "batch size", batch=BATCH + 1)
    expect_refused(small_ds.path, sd, "memory budget", memory="20%")
    expect_refused(small_ds.path, sd, "drop_last", drop_last=True)
    # a state past this loader's epochs
    late = hdmlp.Loader(small_ds.path, BATCH, MEM, seed=SEED, epochs=EPOCHS)
    for _ in range(2 * batches_per_epoch(small_ds.n) + 1):
        late.next_batch()
    with pytest.raises(hdmlp.InvalidArgumentError, match="epoch"):
        hdmlp.Loader(small_ds.path, BATCH, MEM, seed=SEED, epochs=2, state=late.state_dict())
    # the order does not depend on threads, engine or refill: those may change
    ok = hdmlp.Loader(small_ds.path, BATCH, MEM, seed=SEED, epochs=EPOCHS, threads=3,
                      engine="pread", refill="whole", state=sd)
    assert ok.position == (0, 5)


def test_damaged_or_foreign_state_dicts(small_ds):
    sd = saved_state(small_ds.path)
    mk = lambda st: hdmlp.Loader(small_ds.path, BATCH, MEM, seed=SEED, epochs=EPOCHS, state=st)
    bad = dict(sd, state=bytes([sd["state"][0] ^ 1]) + sd["state"][1:])
    with pytest.raises(hdmlp.InvalidArgumentError, match="not a loader state"):
        mk(bad)
    flipped = bytearray(sd["state"])
    flipped[90] ^= 1  # inside the checksummed body
    with pytest.raises(hdmlp.CorruptDataError, match="checksum") as ei:
        mk(dict(sd, state=bytes(flipped)))
    assert ei.value.code == hdmlp.E_CORRUPT and isinstance(ei.value, hdmlp.Error)
    with pytest.raises(hdmlp.InvalidArgumentError, match="version"):
        mk(dict(sd, version=2))
    with pytest.raises(hdmlp.InvalidArgumentError, match="format"):
        mk(dict(sd, format="something.else"))
    with pytest.raises(hdmlp.InvalidArgumentError, match="missing 'state'"):
        mk({k: v for k, v in sd.items() if k != "state"})
    with pytest.raises(hdmlp.InvalidArgumentError, match="outside"):
        mk(dict(sd, batch=10_000))
    with pytest.raises(hdmlp.InvalidArgumentError, match="does not match"):
        mk(dict(sd, batch=sd["batch"] + 1))  # the dict must agree with the bytes
    with pytest.raises(hdmlp.InvalidArgumentError, match="does not match"):
        mk(dict(sd, epoch=1))
    with pytest.raises(hdmlp.InvalidArgumentError, match="bytes"):
        mk(dict(sd, state=b""))
    with pytest.raises(TypeError):
        mk(sd["state"])
    with pytest.raises(TypeError):
        mk(dict(sd, state=12))


def test_load_state_dict_only_before_iterating(small_ds):
    sd = saved_state(small_ds.path)
    ld = hdmlp.Loader(small_ds.path, BATCH, MEM, seed=SEED, epochs=EPOCHS)
    next(iter(ld))
    with pytest.raises(hdmlp.StateError, match="before iterating"):
        ld.load_state_dict(sd)
    ld.close()
    with pytest.raises(hdmlp.StateError, match="closed"):
        ld.load_state_dict(sd)
    with pytest.raises(hdmlp.StateError, match="closed"):
        ld.state_dict()


def test_load_state_dict_with_world_2_points_to_state_argument(small_ds):
    peers = [f"127.0.0.1:{free_port()}" for _ in range(2)]
    ld = hdmlp.Loader(small_ds.path, BATCH, MEM, seed=SEED, epochs=1, rank=0, world=2,
                      peers=peers, job_token=1, peer_timeout=1)
    with pytest.raises(hdmlp.StateError, match="state="):
        ld.load_state_dict({})
    ld.close()


# ---- killed processes ------------------------------------------------------------------------

@pytest.mark.parametrize("stop", [40, 63])  # mid-epoch 0; after epoch 0's last batch
def test_kill_and_resume_single_rank(small_ds, tmp_path, stop):
    ref = reference(small_ds.path)
    p = start(child_args(small_ds.path, tmp_path / "a.pkl", stop=stop))
    wait_saved_then_kill([p])
    a = load(tmp_path / "a.pkl")
    with open(tmp_path / "state.pkl", "wb") as f:
        pickle.dump(a, f)
    p = start(child_args(small_ds.path, tmp_path / "b.pkl", state_in=str(tmp_path / "state.pkl")))
    finish([p])
    b = load(tmp_path / "b.pkl")
    nb = batches_per_epoch(small_ds.n)
    assert len(a["indices"]) == stop // nb * small_ds.n + stop % nb * BATCH
    assert a["indices"] + b["indices"] == ref


def test_kill_and_resume_two_ranks(small_ds, tmp_path):
    def ports():
        return [f"127.0.0.1:{free_port()}" for _ in range(2)]

    def args(r, peers, **kw):
        return child_args(small_ds.path, tmp_path / f"{kw.pop('tag')}{r}.pkl", rank=r, world=2,
                          peers=peers, **kw)

    peers = ports()
    finish([start(args(r, peers, tag="full")) for r in range(2)])
    stop = 45  # of 32 batches per epoch and rank: inside epoch 1
    peers = ports()
    procs = [start(args(r, peers, tag="a", stop=stop)) for r in range(2)]
    wait_saved_then_kill(procs)
    peers = ports()  # a new job on new ports
    procs = [start(args(r, peers, tag="b", state_in=str(tmp_path / f"a{r}.pkl")))
             for r in range(2)]
    finish(procs)
    union = []
    for r in range(2):
        full = load(tmp_path / f"full{r}.pkl")["indices"]
        a, b = load(tmp_path / f"a{r}.pkl")["indices"], load(tmp_path / f"b{r}.pkl")["indices"]
        nb, per = batches_per_epoch(small_ds.n, 2, r), small_ds.n // 2
        assert len(a) == stop // nb * per + stop % nb * BATCH
        assert a + b == full, f"rank {r}"
        union += full
    assert sorted(union) == sorted(list(range(small_ds.n)) * EPOCHS)


# ---- hdmlp.torch ---------------------------------------------------------------------------

def test_torch_dataset_kill_and_resume(small_ds, tmp_path):
    pytest.importorskip("torch")
    ref = reference(small_ds.path)
    stop = 63 + 63  # after epoch 1's last batch, inside the training loop's body
    p = start(child_args(small_ds.path, tmp_path / "a.pkl", stop=stop, api="torch"))
    wait_saved_then_kill([p])
    a = load(tmp_path / "a.pkl")
    assert a["epoch"] == 1 and a["state"]["loader"]["batch"] == 63
    p = start(child_args(small_ds.path, tmp_path / "b.pkl", api="torch",
                         state_in=str(tmp_path / "a.pkl")))
    finish([p])
    assert a["indices"] + load(tmp_path / "b.pkl")["indices"] == ref


def test_torch_dataset_state_round_trip_and_mid_epoch(small_ds):
    torch = pytest.importorskip("torch")
    import hdmlp.torch as ht
    ref = reference(small_ds.path)
    mk = lambda: ht.HdmlpIterableDataset(small_ds.path, BATCH, MEM, seed=SEED, epochs=EPOCHS,
                                         with_indices=True)
    ds = mk()
    with pytest.raises(hdmlp.StateError, match="iterate first"):
        ds.state_dict()  # nothing ran in this process yet
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    got = []
    for i, (_, _, idx) in enumerate(dl):
        got.extend(idx.tolist())
        if i == 20:
            break
    sd = pickle.loads(pickle.dumps(ds.state_dict()))
    assert sd["format"] == "hdmlp.torch" and sd["loader"]["batch"] == 21
    ds2 = mk()
    ds2.load_state_dict(sd)
    assert ds2.state_dict() == sd  # loaded, not used yet
    dl2 = torch.utils.data.DataLoader(ds2, batch_size=None, num_workers=0)
    for epoch in range(0, EPOCHS):
        ds2.set_epoch(epoch)
        for _, _, idx in dl2:
            got.extend(idx.tolist())
    assert got == ref
    with pytest.raises(hdmlp.InvalidArgumentError, match="format"):
        ds2.load_state_dict(sd["loader"])
    ds3 = ht.HdmlpIterableDataset(small_ds.path, BATCH, MEM, seed=SEED + 1, epochs=EPOCHS)
    ds3.load_state_dict(sd)
    with pytest.raises(ValueError, match="seed"):
        next(iter(ds3))


def _torch_run(path, workers, persistent, cut=None, state=None):
    """Indices a DataLoader yields over all EPOCHS (from `state` on, if given); with `cut`,
    stops after `cut` batches of the whole run and returns (indices, state_dict)."""
    import hdmlp.torch as ht
    ds = ht.HdmlpIterableDataset(path, BATCH, MEM, seed=SEED, epochs=EPOCHS, with_indices=True)
    dl = ht.DataLoader(ds, batch_size=None, num_workers=workers,
                       persistent_workers=persistent and workers > 0)
    start = 0
    if state is not None:
        dl.load_state_dict(state)
        start = state["loader"]["epoch"]
    got, n = [], 0
    for epoch in range(start, EPOCHS):
        ds.set_epoch(epoch)
        for _, _, idx in dl:
            got.extend(idx.tolist())
            n += 1
            if n == cut:
                return got, pickle.loads(pickle.dumps(dl.state_dict()))
    return got


@pytest.mark.parametrize("persistent", [False, True])
def test_torch_resume_with_workers_at_cut_points(small_ds, persistent):
    pytest.importorskip("torch")
    ref = reference(small_ds.path)
    nb = batches_per_epoch(small_ds.n)
    for cut in (1, 7, nb, nb + 5):
        first, sd = _torch_run(small_ds.path, 2, persistent, cut=cut)
        rest = _torch_run(small_ds.path, 2, persistent, state=sd)
        assert first + rest == ref, f"cut after {cut} batches"


def test_torch_state_with_workers_needs_the_counting_dataloader(small_ds):
    torch = pytest.importorskip("torch")
    import hdmlp.torch as ht
    ds = ht.HdmlpIterableDataset(small_ds.path, BATCH, MEM, seed=SEED, epochs=EPOCHS)
    for i, _ in enumerate(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)):
        if i == 3:
            break
    with pytest.raises(hdmlp.StateError, match="hdmlp.torch.DataLoader"):
        ds.state_dict()  # workers read ahead of what the plain DataLoader yielded
