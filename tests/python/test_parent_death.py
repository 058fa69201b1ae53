"""hdmlp.torch when the training process dies by SIGKILL: its DataLoader workers (fork and
forkserver start methods, persistent or not) and the data plane exit within seconds, even
while the workers are blocked on a full queue to the dead process (issue 25 item 5: they
stayed alive for minutes, holding their memory)."""
import io
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from conftest import SEED, pack

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
PIL = pytest.importorskip("PIL.Image")

EXIT_WITHIN = 10.0  # seconds; the watch ends them in well under one

# The training process: takes one batch, then stops consuming while its workers fill their
# queues (image batches cross by value, more than a pipe holds), and reports.
CHILD = r"""
import json, os, sys, time
import hdmlp, hdmlp.torch as ht

def main():
    path, method, persistent = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
    ds = ht.HdmlpIterableDataset(path, 16, "8M", seed=5,
                                 image=hdmlp.ImagePipeline(size=48))
    dl = ht.DataLoader(ds, num_workers=2, persistent_workers=persistent,
                       multiprocessing_context=method)
    it = iter(dl)
    next(it)
    time.sleep(1.0)
    print(json.dumps({"plane": ds.stats()["plane_pid"]}), flush=True)
    time.sleep(600)

if __name__ == "__main__":
    main()
"""


@pytest.fixture(scope="module")
def photos(tmp_root):
    """96 JPEG photographs of 64x64 px in 2 classes."""
    rng = np.random.default_rng(SEED)
    src = os.path.join(tmp_root, "orphan-src")
    for i in range(96):
        d = os.path.join(src, "ab"[i % 2])
        os.makedirs(d, exist_ok=True)
        buf = io.BytesIO()
        PIL.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(buf, "JPEG")
        with open(os.path.join(d, f"{i:03d}.jpg"), "wb") as f:
            f.write(buf.getvalue())
    return pack(src, os.path.join(tmp_root, "orphan.hdmlp"), "--chunk-size", "8")


def _marked(token):
    """Pids of the live processes whose environment carries the token: the training
    process and everything it started (zombies have an empty environ)."""
    found = []
    needle = f"HDMLP_TEST_ORPHAN={token}".encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(int(name))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("method, persistent", [("fork", False), ("forkserver", True)])
def test_workers_and_plane_exit_when_the_training_process_is_killed(photos, tmp_path,
                                                                    method, persistent):
    script = tmp_path / "train.py"
    script.write_text(CHILD)
    token = uuid.uuid4().hex
    env = dict(os.environ, HDMLP_TEST_ORPHAN=token)
    p = subprocess.Popen([sys.executable, str(script), photos, method, str(int(persistent))],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = p.stdout.readline()
        assert line, p.stderr.read()
        plane = json.loads(line)["plane"]
        started = set(_marked(token)) - {p.pid}
        assert plane in started
        assert len(started) >= 3, started  # two workers and the plane at least
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
        deadline = time.monotonic() + EXIT_WITHIN
        while _marked(token) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = _marked(token)
        assert not left, (f"{len(left)} of the processes the killed training process "
                          f"started still run {EXIT_WITHIN:.0f} s later (workers and plane "
                          f"were {sorted(started)})")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        for pid in _marked(token):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
