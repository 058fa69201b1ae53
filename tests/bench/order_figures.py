#!/usr/bin/python3
"""Randomness figures of delivered orders: one code path for every contender.

    order_figures.py [--k 64] [--n N] FILE...      # prints one JSON object
    order_figures.py --self-test

Input: epochs, each the list of the storage positions (ints) of the samples delivered in
that epoch, in delivery order. A FILE holds one line per epoch, positions separated by
spaces (an empty line is an empty epoch): the format of `hdmlp-bench --ids FILE` (its
sample indices are storage positions: sample i lives in chunk i / K) and of the logs of
shard_recipe.py and peers_bench's hdmlp.torch runs. Several FILEs (e.g. the FILE.<rank> of
several ranks) are each figured alone and listed in order.

Figures (K samples a chunk, chunk = storage position // K; N samples; L the epoch's length):
  same_chunk_distance   mean |pos(a) - pos(b)| over pairs of samples of the same chunk
                        delivered in the same epoch, divided by (L + 1) / 3 (the same mean
                        in a true permutation of L positions), pooled pair-weighted over
                        epochs: hdmlp-bench's own definition (loader/cli/bench_random.h).
                        1 = a chunk's samples as spread as in a permutation, small =
                        clustered in time.
  epoch_position_correlation
                        Pearson r of a sample's position in epoch e and in epoch e + 1 over
                        the samples delivered in both, the mean over consecutive epoch
                        pairs (hdmlp-bench's definition). 0 = unrelated orders.
  spearman_storage      Spearman correlation of delivery position against storage position
                        within an epoch, the mean over epochs. 0 = no trend, 1 = storage
                        order.
  neighbour_fraction    the fraction of consecutive deliveries (within an epoch, pooled over
                        epochs) whose storage positions differ by less than K. About
                        (2K - 1) / N for a permutation, 1 for storage order.
Positions >= N are counted in L but belong to no chunk and no sample (as in hdmlp-bench).
Undefined figures are null. numpy; sorting makes it O(L log L) per epoch.
"""
import argparse
import json
import math
import sys

import numpy as np


def read_ids(path):
    """The epochs of an --ids file: a list of int64 arrays, one per line."""
    epochs = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            epochs.append(np.array(line.split(), dtype=np.int64) if line else
                          np.empty(0, dtype=np.int64))
    return epochs


def write_ids(path, epochs):
    """Writes epochs in the --ids format (one line per epoch)."""
    with open(path, "w") as f:
        for e in epochs:
            f.write(" ".join(map(str, np.asarray(e, dtype=np.int64).tolist())))
            f.write("\n")


def _pearson(x, y):
    if len(x) < 2:
        return math.nan
    x = x - x.mean()
    y = y - y.mean()
    den = math.sqrt(float(np.dot(x, x)) * float(np.dot(y, y)))
    return float(np.dot(x, y)) / den if den > 0 else math.nan


def _ranks(v):
    """Average ranks (ties share their mean rank), as float64."""
    order = np.argsort(v, kind="stable")
    sv = v[order]
    r = np.empty(len(v), dtype=np.float64)
    # first index of each run of equal values and the run's mean rank
    starts = np.flatnonzero(np.r_[True, sv[1:] != sv[:-1]])
    ends = np.r_[starts[1:], len(v)]
    mean_rank = (starts + ends - 1) / 2.0
    r[order] = np.repeat(mean_rank, ends - starts)
    return r


def _pair_distance(s, k, n):
    """(sum of |pos(a) - pos(b)| over same-chunk pairs, pairs) of one epoch."""
    pos = np.arange(len(s), dtype=np.int64)
    ok = s < n
    c = s[ok] // k
    p = pos[ok]
    if len(c) < 2:
        return 0.0, 0
    order = np.argsort(c, kind="stable")  # stable: positions stay increasing per chunk
    c = c[order]
    p = p[order].astype(np.float64)
    starts = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
    counts = np.diff(np.r_[starts, len(c)])
    m = np.repeat(counts, counts)
    rank = np.arange(len(c)) - np.repeat(starts, counts)
    # sum over pairs i < j of p_j - p_i = sum_i p_i * (2 * rank_i - (m - 1))
    dist = float(np.dot(p, 2 * rank - (m - 1)))
    pairs = int((counts * (counts - 1) // 2).sum())
    return dist, pairs


def figures(epochs, k=64, n=None):
    """The four figures (a dict, None where undefined) of a list of epochs of positions."""
    epochs = [np.asarray(e, dtype=np.int64) for e in epochs]
    if k < 1:
        raise ValueError("k must be >= 1")
    if n is None:
        n = 1 + max((int(e.max()) for e in epochs if len(e)), default=-1)
    dist_sum = dist_norm = 0.0
    corr = []
    spear = []
    neigh = steps = 0
    prev = None
    for e in epochs:
        if (e < 0).any():
            raise ValueError("negative storage position")
        d, pairs = _pair_distance(e, k, n)
        if pairs:
            dist_sum += d
            dist_norm += pairs * (len(e) + 1.0) / 3.0
        valid = e[e < n]
        cur = np.zeros(n, dtype=np.int64)  # position + 1, 0 = not delivered
        cur[valid] = np.flatnonzero(e < n) + 1
        if prev is not None:
            both = (prev != 0) & (cur != 0)
            r = _pearson(prev[both].astype(np.float64), cur[both].astype(np.float64))
            if not math.isnan(r):
                corr.append(r)
        prev = cur
        if len(e) >= 2:
            r = _pearson(np.arange(len(e), dtype=np.float64), _ranks(e))
            if not math.isnan(r):
                spear.append(r)
            neigh += int((np.abs(np.diff(e)) < k).sum())
            steps += len(e) - 1

    def num(x):
        return None if x is None or math.isnan(x) else float(x)

    return {
        "same_chunk_distance": num(dist_sum / dist_norm) if dist_norm > 0 else None,
        "epoch_position_correlation": num(sum(corr) / len(corr)) if corr else None,
        "spearman_storage": num(sum(spear) / len(spear)) if spear else None,
        "neighbour_fraction": neigh / steps if steps else None,
        "epochs": len(epochs),
        "epoch_pairs": len(corr),
        "deliveries": int(sum(len(e) for e in epochs)),
        "k": int(k),
        "n": int(n),
    }


def file_figures(path, k=64, n=None):
    out = figures(read_ids(path), k=k, n=n)
    out["file"] = path
    return out


def self_test():
    """Quick checks (the same as test_order_figures.py); raises AssertionError."""
    rng = np.random.default_rng(1)
    n, k = 8000, 64
    perm = [rng.permutation(n) for _ in range(4)]
    f = figures(perm, k=k, n=n)
    assert abs(f["same_chunk_distance"] - 1) < 0.03, f
    assert abs(f["spearman_storage"]) < 0.03, f
    assert abs(f["epoch_position_correlation"]) < 0.03, f
    assert f["neighbour_fraction"] < 3 * (2 * k - 1) / n, f
    ident = [np.arange(n)] * 4
    f = figures(ident, k=k, n=n)
    assert f["same_chunk_distance"] < 3 * (k + 1) / 3 / ((n + 1) / 3), f
    assert f["spearman_storage"] == 1.0 and f["neighbour_fraction"] == 1.0, f
    assert abs(f["epoch_position_correlation"] - 1) < 1e-12, f
    return True


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="*")
    p.add_argument("--k", type=int, default=64, help="samples a chunk (default 64)")
    p.add_argument("--n", type=int, help="samples (default: the largest position + 1)")
    p.add_argument("--self-test", action="store_true")
    o = p.parse_args()
    if o.self_test:
        self_test()
        print("order_figures: self-test passed")
        return
    if not o.files:
        p.error("need FILE... or --self-test")
    out = [file_figures(f, o.k, o.n) for f in o.files]
    json.dump(out[0] if len(out) == 1 else out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
