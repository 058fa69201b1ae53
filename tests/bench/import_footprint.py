"""What `import hdmlp` costs a process: wall time of the import, resident memory, and the
shared libraries mapped (how many, and whether the distributed stack is among them).

    python3 tests/bench/import_footprint.py [--runs N] [--loader DATASET]

Imports hdmlp in N fresh interpreters (default 5) with the hdmlp found on sys.path
(PYTHONPATH=BUILD/python for a CMake build tree, or a venv's python for an installed
package) and prints the median import time and, from the last run, VmRSS and the .so count
read from /proc/self/status and /proc/self/maps. With --loader, each run also iterates one
epoch of a single-rank loader over DATASET (budget 100 %) before measuring.
"""
import argparse
import json
import statistics
import subprocess
import sys

PROBE = r"""
import json, sys, time
t0 = time.perf_counter()
import hdmlp
dt = time.perf_counter() - t0
if len(sys.argv) > 1:
    for b in hdmlp.Loader(sys.argv[1], 64, "100%", seed=1, epochs=1):
        pass
rss = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS:"))
libs = sorted({l.split()[-1] for l in open("/proc/self/maps")
               if ".so" in l.split()[-1] and "/" in l.split()[-1]})
print(json.dumps({"import_s": dt, "rss_kib": rss, "libs": libs, "file": hdmlp.__file__}))
"""

WATCH = ("libmpi", "libgrpc", "libprotobuf-c", "libssl", "libcrypto", "libhdmlp-rpc")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--loader", metavar="DATASET")
    args = ap.parse_args()
    times, last = [], None
    for _ in range(args.runs):
        cmd = [sys.executable, "-c", PROBE] + ([args.loader] if args.loader else [])
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            sys.exit(f"import_footprint: the probe failed (exit {res.returncode}):\n{res.stderr}")
        last = json.loads(res.stdout)
        times.append(last["import_s"])
    libs = last["libs"]
    print(f"hdmlp from      {last['file']}")
    print(f"import time     {statistics.median(times) * 1e3:.1f} ms (median of {args.runs})")
    print(f"VmRSS           {last['rss_kib'] / 1024:.1f} MiB")
    print(f"shared objects  {len(libs)} mapped")
    for w in WATCH:
        hits = [l for l in libs if l.rsplit("/", 1)[-1].startswith(w)]
        print(f"  {w:14s} {'mapped' if hits else 'not mapped'}")


if __name__ == "__main__":
    main()
