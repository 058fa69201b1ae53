"""Blocking calls release the GIL; Ctrl-C (SIGINT) interrupts a waiting next() promptly.

Reads are made slow on demand by an LD_PRELOAD shim (slowio.c: pread waits until a delay
passes or is cleared), so the tests run in child processes started with LD_PRELOAD.
"""
import json
import os
import signal
import subprocess
import sys

import pytest

DELAY_MS = 10000  # a blocked call would take this long; every assertion is far below it

CHILD = r"""
import ctypes, json, signal, sys, threading, time
import hdmlp

signal.signal(signal.SIGINT, signal.default_int_handler)
shim = ctypes.CDLL(None)
shim.slowio_waiting.restype = ctypes.c_uint
path, mode, delay = sys.argv[1], sys.argv[2], int(sys.argv[3])
out = {}

def later(seconds, fn):
    t = threading.Timer(seconds, fn)
    t.daemon = True
    t.start()

if mode == "sigint":
    ds = hdmlp.Dataset(path)
    shim.slowio_set_delay_ms(delay)
    ld = hdmlp.Loader(ds, 32, "40%", seed=1, epochs=1, engine="pread", threads=1)
    it = iter(ld)
    print("ready", flush=True)
    t0 = time.monotonic()
    try:
        next(it)
        out["interrupted"] = False
    except KeyboardInterrupt:
        out["interrupted"] = True
        out["after"] = time.monotonic() - t0
        out["reads_waiting"] = shim.slowio_waiting()
    shim.slowio_set_delay_ms(0)
    seen = []
    for b in it:  # the same epoch resumes: nothing lost, nothing twice
        seen.extend(b.indices)
    out["n"], out["unique"] = len(seen), len(set(seen))
elif mode == "gil-next":
    ds = hdmlp.Dataset(path)
    shim.slowio_set_delay_ms(delay)
    ld = hdmlp.Loader(ds, 32, "40%", seed=1, epochs=1, engine="pread", threads=2)
    count = [0]
    done = [False]
    marks = {}
    def spin():
        while not done[0]:
            count[0] += 1
    def sample():
        marks["a"] = count[0]
        time.sleep(0.3)
        marks["b"] = count[0]
        marks["waiting"] = shim.slowio_waiting()
        shim.slowio_set_delay_ms(0)
    threading.Thread(target=spin, daemon=True).start()
    later(0.2, sample)
    t0 = time.monotonic()
    batch = next(iter(ld))
    out["elapsed"] = time.monotonic() - t0
    done[0] = True
    out.update(marks)
    out["batch"] = len(batch)
elif mode == "gil-read":
    shim.slowio_set_delay_ms(delay)
    later(0.3, lambda: shim.slowio_set_delay_ms(0))
    t0 = time.monotonic()
    ds = hdmlp.Dataset(path)  # reads the index
    out["open"] = time.monotonic() - t0
    shim.slowio_set_delay_ms(delay)
    later(0.3, lambda: shim.slowio_set_delay_ms(0))
    t0 = time.monotonic()
    data = ds[0]
    out["read"] = time.monotonic() - t0
print(json.dumps(out), flush=True)
"""


def child(small_ds, mode):
    shim = os.environ.get("HDMLP_TEST_SLOWIO")
    if not shim or not os.path.exists(shim):
        pytest.skip("slowio shim not built (HDMLP_TEST_SLOWIO)")
    # after any preload already there (sanitizer runtimes must come first)
    env = dict(os.environ, LD_PRELOAD=" ".join(filter(None, [os.environ.get("LD_PRELOAD"),
                                                            shim])))
    return subprocess.Popen([sys.executable, "-c", CHILD, small_ds.path, mode, str(DELAY_MS)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)


def result(proc):
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_sigint_interrupts_a_blocked_next_promptly(small_ds):
    proc = child(small_ds, "sigint")
    assert proc.stdout.readline().strip() == "ready"
    import time
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    r = result(proc)
    print(r)
    assert r["interrupted"], r
    assert r["after"] < 2.0, r
    assert r["reads_waiting"] >= 1, "next() was not blocked on I/O"
    assert r["n"] == small_ds.n and r["unique"] == small_ds.n, r


def test_next_releases_the_gil_while_waiting(small_ds):
    r = result(child(small_ds, "gil-next"))
    print(r)
    assert r["waiting"] >= 1, "next() was not blocked on I/O"
    assert r["b"] > r["a"], "another thread made no progress while next() waited"
    assert r["elapsed"] < 3.0, r
    assert r["batch"] == 32


def test_open_and_read_release_the_gil(small_ds):
    r = result(child(small_ds, "gil-read"))
    assert r["open"] < 3.0 and r["read"] < 3.0, r
