#!/usr/bin/python3
"""Checks for the distributed hdmlp-bench tests (tests/dist/*.sh).

    dist_check.py union N EPOCHS WORLD PREFIX   every epoch's lines of PREFIX.0..WORLD-1
                                                together hold 0..N-1 exactly once, and
                                                rank r holds N/WORLD (+1 if r < N % WORLD)
    dist_check.py same PREFIX_A PREFIX_B WORLD  per-rank files identical
    dist_check.py get FILE KEY                  a top-level JSON value (last '{' line)
    dist_check.py sum KEY FILE...               sum of KEY over one-rank JSON objects
    dist_check.py plan-vs-run PLAN RUN KEY...   the keys agree (top level and per rank)
    dist_check.py random FILE                   same_chunk_distance and correlation

Exit 0 when the check holds, 1 with a message naming the first difference.
"""
import json
import sys


def fail(msg):
    print(f"dist_check: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def read_lines(path):
    with open(path) as f:
        return [[int(x) for x in line.split()] for line in f.read().splitlines()]


def load_json(path):
    obj = None
    with open(path) as f:
        for line in f:
            if line.startswith("{"):
                obj = json.loads(line)
    if obj is None:
        fail(f"{path}: no JSON object")
    return obj


def union(n, epochs, world, prefix):
    per_rank = [read_lines(f"{prefix}.{r}") for r in range(world)]
    for r, lines in enumerate(per_rank):
        if len(lines) != epochs:
            fail(f"{prefix}.{r}: {len(lines)} epoch lines, expected {epochs}")
        want = n // world + (1 if r < n % world else 0)
        for e, line in enumerate(lines):
            if len(line) != want:
                fail(f"{prefix}.{r} epoch {e}: {len(line)} samples, expected {want}")
    for e in range(epochs):
        seen = [0] * n
        for r in range(world):
            for i in per_rank[r][e]:
                if i < 0 or i >= n:
                    fail(f"epoch {e}: rank {r} delivered sample {i}, outside 0..{n - 1}")
                seen[i] += 1
        dup = [i for i in range(n) if seen[i] > 1]
        miss = [i for i in range(n) if seen[i] == 0]
        if dup or miss:
            fail(f"epoch {e}: {len(dup)} samples delivered twice (e.g. {dup[:5]}), "
                 f"{len(miss)} never (e.g. {miss[:5]})")
    print(f"union ok: {world} ranks x {epochs} epochs, {n} samples each exactly once")


def same(a, b, world):
    for r in range(world):
        if read_lines(f"{a}.{r}") != read_lines(f"{b}.{r}"):
            fail(f"rank {r}: {a}.{r} and {b}.{r} differ")
    print(f"same ok: {world} ranks identical")


def plan_vs_run(plan_path, run_path, keys):
    plan, run = load_json(plan_path), load_json(run_path)
    pairs = [("total", plan, run)]
    for p, r in zip(plan.get("ranks", []), run.get("ranks", [])):
        pairs.append((f"rank {p['rank']}", p, r))
    if len(plan.get("ranks", [])) != len(run.get("ranks", [])):
        fail("plan and run list different ranks")
    bad = []
    for where, p, r in pairs:
        for k in keys:
            if p.get(k) != r.get(k):
                bad.append(f"{where}: {k} plan {p.get(k)} run {r.get(k)}")
    if bad:
        fail("plan != run: " + "; ".join(bad[:8]))
    print(f"plan == run on {', '.join(keys)} ({len(pairs)} objects)")


def main(argv):
    if len(argv) < 2:
        fail("usage: see the module docstring")
    cmd, args = argv[1], argv[2:]
    if cmd == "union":
        union(int(args[0]), int(args[1]), int(args[2]), args[3])
    elif cmd == "same":
        same(args[0], args[1], int(args[2]))
    elif cmd == "get":
        v = load_json(args[0])
        for part in args[1].split("."):
            v = v[int(part)] if isinstance(v, list) else v[part]
        print(v)
    elif cmd == "sum":
        print(sum(load_json(p)[args[0]] for p in args[1:]))
    elif cmd == "plan-vs-run":
        plan_vs_run(args[0], args[1], args[2:])
    elif cmd == "random":
        d = load_json(args[0])
        print(d["same_chunk_distance"], d["epoch_position_correlation"])
    else:
        fail(f"unknown command {cmd}")


if __name__ == "__main__":
    main(sys.argv)
