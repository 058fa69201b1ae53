#!/usr/bin/python3
"""Metadata-only simulation of the Brand protocol (DESIGN.md section 4), single rank.

    sim_brand.py --n N --k K (--a A | --ratio R) [--seed S] [--epochs E]
                 [--policy fill-rate|random] [--runs R] [--json]

Written independently of the C loader to cross-check its loads per chunk. Samples
0..N-1, sample i in chunk i // K at slot i % K, C = ceil(N / K) chunks. A abstract chunks
(--ratio R gives A = clamp(floor(R * C), 1, C)); the chunks are split into A groups of
consecutive chunks, the first C mod A groups one chunk larger. Each epoch a seeded random
permutation of the samples is requested in order. Request x at (g, s): a hit takes the
sample held by slot (g, s) (any sample of group g at slot s) and empties the slot; a miss
loads the chunk c' of group g whose sample at slot s is unconsumed and which fills the
most empty slots of g with samples unfilled this epoch (fill-rate; ties at random) or a
random such chunk (random), fills those slots and serves slot s. Nothing is evicted.

Prints loads per chunk per epoch and misses per epoch (or one JSON object with --json).
The random generator is numpy's, not the loader's: compare statistics, not sequences.
"""
import argparse
import json
import sys

import numpy as np


def simulate(n, k, a, seed, epochs, policy):
    c = -(-n // k)
    a = max(1, min(a, c))
    base, extra = divmod(c, a)
    sizes = [base + 1 if g < extra else base for g in range(a)]
    start = np.concatenate(([0], np.cumsum(sizes)))
    group = np.repeat(np.arange(a), sizes)
    exists = (np.arange(c * k) < n).reshape(c, k)
    rng = np.random.default_rng(seed)
    slot = np.full((a, k), -1, dtype=np.int64)
    out = {"loads_per_chunk": [], "misses": [], "hits": [], "samples_filled": [],
           "fill_hist": [0] * 11}
    for epoch in range(epochs):
        filled = ~exists.copy()
        order = rng.permutation(n)
        loads = misses = hits = placed = 0
        delivered = np.zeros(n, dtype=bool)
        for x in order:
            ch, s = divmod(int(x), k)
            g = int(group[ch])
            y = int(slot[g, s])
            if y >= 0:
                hits += 1
            else:
                c0, c1 = int(start[g]), int(start[g + 1])
                eligible = np.flatnonzero(~filled[c0:c1, s])
                fillable = ~filled[c0:c1] & (slot[g] < 0)
                if policy == "fill-rate":
                    rate = fillable[eligible].sum(axis=1)
                    eligible = eligible[rate == rate.max()]
                pick = int(eligible[rng.integers(len(eligible))])
                mask = fillable[pick]
                cols = np.flatnonzero(mask)
                slot[g, cols] = (c0 + pick) * k + cols
                filled[c0 + pick, cols] = True
                out["fill_hist"][min(10, len(cols) * 10 // k)] += 1
                placed += len(cols)
                loads += 1
                misses += 1
                y = int(slot[g, s])
            slot[g, s] = -1
            if delivered[y]:
                sys.exit(f"sim_brand: sample {y} delivered twice in epoch {epoch}")
            delivered[y] = True
        if not delivered.all() or (slot >= 0).any():
            sys.exit(f"sim_brand: epoch {epoch} ended with undelivered samples or full slots")
        out["loads_per_chunk"].append(loads / c)
        out["misses"].append(misses)
        out["hits"].append(hits)
        out["samples_filled"].append(placed)
    out.update(n=n, k=k, chunks=c, abstract_chunks=a, seed=seed, epochs=epochs,
               policy=policy)
    out["mean_loads_per_chunk"] = sum(out["loads_per_chunk"]) / epochs
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, required=True, help="samples N")
    p.add_argument("--k", type=int, required=True, help="samples per chunk K")
    p.add_argument("--a", type=int, help="abstract chunks A (the loader's stats report it)")
    p.add_argument("--ratio", type=float, help="A = floor(RATIO * C) instead of --a")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--policy", choices=["fill-rate", "random"], default="fill-rate")
    p.add_argument("--runs", type=int, default=1, help="average over RUNS seeds")
    p.add_argument("--json", action="store_true")
    o = p.parse_args()
    if o.n < 1 or o.k < 1 or o.epochs < 1 or o.runs < 1 or (o.a is None) == (o.ratio is None):
        p.error("need N >= 1, K >= 1, E >= 1, RUNS >= 1 and exactly one of --a / --ratio")
    c = -(-o.n // o.k)
    a = o.a if o.a is not None else int(o.ratio * c)
    if a < 1:
        a = 1
    runs = [simulate(o.n, o.k, a, o.seed + r, o.epochs, o.policy) for r in range(o.runs)]
    res = runs[0]
    if o.runs > 1:
        res["runs"] = o.runs
        res["mean_loads_per_chunk"] = sum(r["mean_loads_per_chunk"] for r in runs) / o.runs
        res["mean_misses"] = sum(sum(r["misses"]) for r in runs) / (o.runs * o.epochs)
    if o.json:
        print(json.dumps(res))
        return
    print(f"N={o.n} K={o.k} C={c} A={res['abstract_chunks']} policy={o.policy} "
          f"seed={o.seed} epochs={o.epochs} runs={o.runs}")
    for e, (l, m) in enumerate(zip(res["loads_per_chunk"], res["misses"])):
        print(f"epoch {e}: loads per chunk {l:.3f}, misses {m}")
    print(f"mean loads per chunk {res['mean_loads_per_chunk']:.3f}")


if __name__ == "__main__":
    main()
