"""hdmlp.torch's data plane with DataLoader workers: two ranks resuming exactly, a killed
worker or plane gives a clear error in seconds, nothing is left behind after exit."""
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")

RESUME_CHILD = r"""
import json, os, pickle, sys
import torch.distributed as dist
import hdmlp.torch as ht

path, mode, cut, state_file = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
dist.init_process_group("gloo")
rank = dist.get_rank()
workers = 0 if mode == "ref" else 2
ds = ht.HdmlpIterableDataset(path, 32, "40%", seed=5, with_indices=True, epochs=2)
dl = ht.DataLoader(ds, batch_size=None, num_workers=workers, persistent_workers=workers > 0)
start = 0
if mode == "rest":
    with open(f"{state_file}.{rank}", "rb") as f:
        state = pickle.load(f)
    dl.load_state_dict(state)
    start = state["loader"]["epoch"]
got, n = [], 0
for epoch in range(start, 2):
    ds.set_epoch(epoch)
    for _, _, idx in dl:
        got.extend(idx.tolist())
        n += 1
        if n == cut and mode == "first":
            with open(f"{state_file}.{rank}", "wb") as f:
                pickle.dump(dl.state_dict(), f)
            break
    dist.barrier()  # ranks in step, as DDP training keeps them
    if n == cut and mode == "first":
        break
del dl, ds
dist.barrier()
dist.destroy_process_group()
print(json.dumps({"rank": rank, "indices": got}), flush=True)
"""


def _ranks(args, world=2):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(world):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   RANK=str(rank), WORLD_SIZE=str(world))
        procs.append(subprocess.Popen([sys.executable, "-c", RESUME_CHILD] + args, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    out = {}
    try:
        for p in procs:
            o, e = p.communicate(timeout=180)
            assert p.returncode == 0, e
            r = json.loads(o.strip().splitlines()[-1])
            out[r["rank"]] = r["indices"]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return out


def test_two_ranks_with_workers_resume_exactly(small_ds, tmp_path):
    ref = _ranks([small_ds.path, "ref", "0", str(tmp_path / "unused")])
    assert sorted(ref[0] + ref[1]) == sorted(list(range(small_ds.n)) * 2)
    per_rank = len(ref[0]) // 2 // 32  # about the batches per epoch
    for cut in (5, per_rank + 3):
        state = tmp_path / f"state-{cut}"
        first = _ranks([small_ds.path, "first", str(cut), str(state)])
        rest = _ranks([small_ds.path, "rest", "0", str(state)])
        for r in (0, 1):
            assert first[r] + rest[r] == ref[r], f"rank {r}, cut after {cut} batches"


KILL_CHILD = r"""
import json, os, signal, sys, time
import torch.utils.data
import hdmlp, hdmlp.torch as ht

path, victim = sys.argv[1], sys.argv[2]
ds = ht.HdmlpIterableDataset(path, 16, "40%", seed=5)
dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=True)
it = iter(dl)
next(it)
plane = ds.stats()["plane_pid"]
print(json.dumps({"plane": plane}), flush=True)
pid = it._workers[0].pid if victim == "worker" else plane
os.kill(pid, signal.SIGKILL)
t0 = time.monotonic()
try:
    for _ in it:
        pass
    print(json.dumps({"error": None}), flush=True)
except Exception as exc:
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}",
                      "after": time.monotonic() - t0, "pid": pid}), flush=True)
"""


def _abstract_sockets():
    with open("/proc/net/unix") as f:
        return {line.split()[-1] for line in f if "hdmlp-plane" in line}


@pytest.mark.parametrize("victim", ["worker", "plane"])
def test_killed_worker_or_plane_fails_clearly_and_leaves_nothing(small_ds, victim):
    before = _abstract_sockets()
    p = subprocess.run([sys.executable, "-c", KILL_CHILD, small_ds.path, victim],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(x) for x in p.stdout.strip().splitlines()]
    plane, result = lines[0]["plane"], lines[-1]
    assert result["error"] is not None, "iteration went on after a process was killed"
    assert result["after"] < 30, result
    if victim == "worker":
        assert str(result["pid"]) in result["error"], result  # names the worker
    else:
        assert "data plane" in result["error"], result
    # the plane follows the main process out; its socket goes with it
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(plane, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"data plane pid {plane} still runs after its main process exited")
    assert _abstract_sockets() <= before


@pytest.mark.parametrize("persistent", [False, True])
def test_breaking_out_of_epochs_matches_no_workers_and_frees_the_arena(small_ds, persistent):
    import hdmlp.torch as ht
    plan = [3, None, 5, None, 1, None, None]  # batches taken per iteration (None: all)

    def run(workers):
        ds = ht.HdmlpIterableDataset(small_ds.path, 32, "40%", seed=5, with_indices=True)
        dl = ht.DataLoader(ds, batch_size=None, num_workers=workers,
                           persistent_workers=persistent and workers > 0)
        out = []
        for take in plan:
            got = []
            for i, (_, _, idx) in enumerate(dl):
                got.append(idx.tolist())
                if take is not None and i + 1 == take:
                    break
            out.append(got)
        return out

    # workers abandoned mid-epoch hold records; the plane must get them back or it stalls
    assert run(2) == run(0)


def test_a_record_the_training_process_claims_is_never_freed_under_its_copy(small_ds):
    # Raw-byte batches cross the worker queue by place: the training process claims the
    # record, copies it out and releases it; the plane frees only unclaimed records.
    import mmap
    import hdmlp
    from hdmlp import _hdmlp
    ld = hdmlp.Loader(small_ds.path, 8, "40%", seed=1)
    it = iter(ld)
    first, second = next(it), next(it)
    mm = mmap.mmap(-1, 1 << 20)
    _hdmlp._ring_put(mm, 0, first, 7)
    want = [bytes(v) for v in first]
    first.release()
    assert not _hdmlp._ring_released(mm, 0)
    assert not _hdmlp._ring_claim(mm, 0, 8), "another record's sequence number"
    assert _hdmlp._ring_claim(mm, 0, 7)
    assert not _hdmlp._ring_claim(mm, 0, 7), "claimed twice"
    _hdmlp._ring_free(mm, 0)  # the plane: the worker it went to has left
    assert not _hdmlp._ring_released(mm, 0), "freed while claimed"
    taken = _hdmlp._ring_take(mm, 0, 7)
    assert [bytes(v) for v in taken] == want
    taken.release()
    assert _hdmlp._ring_released(mm, 0)
    _hdmlp._ring_put(mm, 0, second, 9)
    second.release()
    _hdmlp._ring_free(mm, 0)  # freed first: the training process must not take it
    assert _hdmlp._ring_released(mm, 0)
    assert not _hdmlp._ring_claim(mm, 0, 9)
    ld.close()
