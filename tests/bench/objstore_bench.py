#!/usr/bin/env python3
"""Object-storage benchmark (issue 13): one epoch at 25 % memory over HTTP on loopback with
an added per-request latency, served by tests/objstore/objstore_server.py.

Contenders, same concurrency (--threads requests in flight):
  hdmlp auto / whole / ranges   hdmlp-bench URL --memory 25% --threads T
  per-sample GETs               one GET per original file in a seeded random order (what an
                                ImageFolder over a fuse-mounted bucket does), T threads with
                                kept-alive connections
  tar shards in order           WebDataset's pattern: shards (as many samples as a chunk) in
                                a shuffled order, each streamed whole, samples passed
                                through a shuffle buffer holding 25 % of the samples
Randomness: the same-chunk distance hdmlp-bench reports (mean |pos(a) - pos(b)| over pairs
of samples of one chunk or shard, 1.0 for a uniform permutation).
Bandwidth: with --bandwidth B (all answers together) and the SSD tier, hdmlp auto's epochs
(the first reads the store and stages chunks, the next read the SSD tier) against the
dataset's bytes / B.

Usage: python3 tests/bench/objstore_bench.py --build BUILD [--samples N] [--latencies 10,30,100]
       [--threads 8] [--bandwidth-mb 40] [--out DIR]
Prints a Markdown table and the ratios; writes DIR/results.json.
"""
import argparse
import http.client
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(os.path.dirname(HERE), "objstore", "objstore_server.py")
K = 64  # samples per chunk and per shard


def make_data(out, n, seed):
    src = os.path.join(out, "src")
    if os.path.isdir(src):
        shutil.rmtree(src)
    rng = random.Random(seed)
    keys = []
    for i in range(n):
        c = f"c{i % 10}"
        os.makedirs(os.path.join(src, c), exist_ok=True)
        key = f"{c}/{i:06d}.bin"
        with open(os.path.join(src, key), "wb") as f:
            f.write(rng.randbytes(rng.randint(24 << 10, 72 << 10)))
        keys.append(key)
    return src, keys


def make_shards(out, src, keys, seed):
    d = os.path.join(out, "shards")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    order = keys[:]
    random.Random(seed).shuffle(order)  # WebDataset shards are written shuffled once
    names = []
    for s in range(0, len(order), K):
        name = f"shard-{s // K:05d}.tar"
        with tarfile.open(os.path.join(d, name), "w") as t:
            for key in order[s:s + K]:
                t.add(os.path.join(src, key), arcname=key)
        names.append(name)
    return names, order


class Server:
    def __init__(self, root, latency_ms=0.0, bandwidth=0.0):
        args = [sys.executable, SERVER, "--root", root, "--latency-ms", str(latency_ms),
                "--bandwidth", str(bandwidth)]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("PORT "), line
        self.port = int(line.split()[1])

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


def same_chunk_distance(order, group_of):
    """bench_random.c's figure for one epoch."""
    count, total, pairs, dist = {}, {}, 0, 0.0
    for p, key in enumerate(order):
        g = group_of[key]
        c = count.get(g, 0)
        dist += c * p - total.get(g, 0)
        pairs += c
        count[g] = c + 1
        total[g] = total.get(g, 0) + p
    return dist / (pairs * (len(order) + 1) / 3.0) if pairs else float("nan")


def per_sample(port, keys, threads, seed):
    order = keys[:]
    random.Random(seed).shuffle(order)
    lock = threading.Lock()
    pos = [0]
    got = [0]

    def work():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while True:
            with lock:
                if pos[0] >= len(order):
                    break
                key = order[pos[0]]
                pos[0] += 1
            conn.request("GET", "/src/" + key)
            r = conn.getresponse()
            body = r.read()
            assert r.status == 200, (key, r.status)
            with lock:
                got[0] += len(body)
        conn.close()

    t0 = time.monotonic()
    ts = [threading.Thread(target=work) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return time.monotonic() - t0, got[0]


def tar_stream(port, shards, threads, buffer_samples, seed):
    rng = random.Random(seed)
    todo = shards[:]
    rng.shuffle(todo)
    lock = threading.Lock()
    buf, out = [], []
    nbytes = [0]

    def work():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while True:
            with lock:
                if not todo:
                    break
                name = todo.pop()
            conn.request("GET", "/shards/" + name)
            r = conn.getresponse()
            data = r.read()
            assert r.status == 200
            with tarfile.open(fileobj=io.BytesIO(data)) as t:
                for m in t:
                    sample = t.extractfile(m).read()
                    with lock:
                        nbytes[0] += len(sample)
                        buf.append(m.name)
                        if len(buf) >= buffer_samples:
                            out.append(buf.pop(rng.randrange(len(buf))))
        conn.close()

    t0 = time.monotonic()
    ts = [threading.Thread(target=work) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    rng.shuffle(buf)
    out.extend(buf)
    return time.monotonic() - t0, nbytes[0], out


def hdmlp(bench, url, refill, threads, extra=()):
    cmd = [bench, url, "--memory", "25%", "--threads", str(threads), "--refill", refill,
           "--seed", "1", "--json", *extra]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if res.returncode != 0:
        raise RuntimeError(f"{cmd}: {res.stderr}")
    return json.loads(res.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--samples", type=int, default=3000)
    ap.add_argument("--latencies", default="10,30,100")
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--bandwidth-mb", type=float, default=40.0)
    ap.add_argument("--out", default="/tmp/hdmlp-objstore-bench")
    a = ap.parse_args()
    bench = os.path.join(a.build, "loader", "hdmlp-bench")
    pack = os.path.join(a.build, "packer", "hdmlp-pack")
    os.makedirs(a.out, exist_ok=True)
    src, keys = make_data(a.out, a.samples, 13)
    shards, shard_order = make_shards(a.out, src, keys, 13)
    group_of = {key: i // K for i, key in enumerate(shard_order)}
    ds = os.path.join(a.out, "ds")
    subprocess.run([pack, "--quiet", "--force", "-o", ds, "--chunk-size", str(K), "--seed", "5",
                    "--compress", "none", "--segment-size", "16M", src], check=True)
    raw = sum(os.path.getsize(os.path.join(src, k)) for k in keys)
    rows, results = [], {"samples": a.samples, "bytes": raw, "threads": a.threads, "runs": []}
    for lat in [float(x) for x in a.latencies.split(",")]:
        srv = Server(a.out, latency_ms=lat)
        try:
            url = f"http://127.0.0.1:{srv.port}/ds"
            r = {"latency_ms": lat}
            for refill in ("auto", "whole", "ranges"):
                j = hdmlp(bench, url, refill, a.threads)
                r[refill] = {"seconds": j["seconds"], "read_ops": j["read_ops"],
                             "amplification": j["read_amplification"],
                             "distance": j["same_chunk_distance"]}
            secs, nb = per_sample(srv.port, keys, a.threads, 1)
            assert nb == raw
            r["per_sample"] = {"seconds": secs, "read_ops": len(keys), "distance": 1.0}
            secs, nb, order = tar_stream(srv.port, shards, a.threads, a.samples // 4, 1)
            assert nb == raw and len(order) == len(keys)
            r["tar"] = {"seconds": secs, "read_ops": len(shards),
                        "distance": same_chunk_distance(order, group_of)}
        finally:
            srv.stop()
        results["runs"].append(r)
        rows.append(r)
    bw = a.bandwidth_mb * 1e6
    srv = Server(a.out, latency_ms=30.0, bandwidth=bw)
    try:
        ssd = os.path.join(a.out, "ssd")
        shutil.rmtree(ssd, ignore_errors=True)
        os.makedirs(ssd)
        j = hdmlp(bench, f"http://127.0.0.1:{srv.port}/ds", "auto", a.threads,
                  ["--epochs", "3", "--ssd-cache", ssd, "--ssd-capacity", "4G"])
        results["bandwidth"] = {"limit_mb_s": a.bandwidth_mb, "epoch_seconds": j["epoch_seconds"],
                                "epoch_source_bytes": j["epoch_source_bytes"],
                                "limit_seconds": raw / bw}
    finally:
        srv.stop()
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(f"{a.samples} samples, {raw / 1e6:.1f} MB, {a.threads} requests in flight, 25 % memory\n")
    print("| latency | hdmlp auto | whole | ranges | per-sample GETs | tar shards | auto vs per-sample | GETs auto / per-sample / tar | distance auto / tar |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['latency_ms']:.0f} ms | {r['auto']['seconds']:.2f} s | {r['whole']['seconds']:.2f} s"
              f" | {r['ranges']['seconds']:.2f} s | {r['per_sample']['seconds']:.2f} s"
              f" | {r['tar']['seconds']:.2f} s | {r['per_sample']['seconds'] / r['auto']['seconds']:.1f}x"
              f" | {r['auto']['read_ops']} / {r['per_sample']['read_ops']} / {r['tar']['read_ops']}"
              f" | {r['auto']['distance']:.3f} / {r['tar']['distance']:.3f} |")
    b = results["bandwidth"]
    print(f"\nbandwidth cap {b['limit_mb_s']:.0f} MB/s (+30 ms a request), SSD tier: epochs "
          + ", ".join(f"{s:.2f} s" for s in b["epoch_seconds"])
          + f"; the cap alone needs {b['limit_seconds']:.2f} s per epoch"
          + f"; source bytes per epoch {b['epoch_source_bytes']}")


if __name__ == "__main__":
    main()
