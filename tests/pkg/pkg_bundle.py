"""The Python package installs the way a new user installs it, and its wheel travels.

    python3 tests/pkg/pkg_bundle.py SCRATCH        (HDMLP_PACK: the hdmlp-pack binary)

1. A copy of the source tree (so pip's in-tree build leaves nothing in the real one), a
   fresh venv (--system-site-packages, for setuptools and torch) and
   `pip install --no-build-isolation --no-index ./python` with none of HDMLP_PREFIX,
   HDMLP_BUILD_DIR, PKG_CONFIG_PATH or PYTHONPATH set: setup.py must build and bundle
   libhdmlp itself. The installed package iterates a small dataset exactly once per epoch,
   maps neither gRPC nor MPI for a single rank, and loads libhdmlp-rpc.so for two ranks.
   `pip install .` from the root of the copy gives the same package.
   The tools come with it: hdmlp-pack and hdmlp-bench on the venv's PATH (console scripts
   running the executables bundled in hdmlp/bin/, whose RUNPATH finds the bundled
   libhdmlp), `python -m hdmlp`, and hdmlp.pack(), which makes the CLI's bytes for the same
   inputs and seed and raises the CLI's message; `hdmlp-pack --verify` passes both.
2. `python3 -m build --no-isolation --wheel` on the copy; the copy is deleted; the wheel is
   installed into a second venv in another directory and does the same there (tools too).
3. Without its libhdmlp-rpc.so, the installed package still serves one rank, and a
   two-rank loader fails with an error naming the module.
Exits 0 when all pass, 1 with "FAIL: ..." otherwise.
"""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# What the library's CMake build reads (the top CMakeLists adds these directories).
SOURCE_PARTS = ["CMakeLists.txt", "hdmlp.pc.in", "hdmlp-static.pc.in", "include", "format",
                "loader", "rpc",
                "packer", "examples", "python", "setup.py", "setup.cfg", "pyproject.toml"]
N_SAMPLES = 300

# Run by the installed package's python: one epoch on one rank, then (argv[2] == "2") two
# ranks in two threads; prints what the parent checks.
CHECK = r"""
import socket, sys, threading
import hdmlp

def mapped(name):
    return any(name in l for l in open("/proc/self/maps"))

path, ranks = sys.argv[1], int(sys.argv[2])
print("file", hdmlp.__file__)
seen = [i for b in hdmlp.Loader(path, 32, "1MiB", seed=5, epochs=1) for i in b.indices]
print("one_rank", len(seen), len(set(seen)))
print("mapped_after_one_rank", int(mapped("libmpi")), int(mapped("libgrpc")),
      int(mapped("libhdmlp-rpc")))
if ranks == 2:
    ports = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    peers = [f"127.0.0.1:{p}" for p in ports]
    out, errors = {}, []

    def rank(r):
        try:
            with hdmlp.Loader(path, 32, "1MiB", seed=5, epochs=1, rank=r, world=2, peers=peers,
                              job_token=7, peer_timeout=20) as ld:
                out[r] = [i for b in ld for i in b.indices]
        except BaseException as e:
            errors.append(repr(e))

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    if errors:
        print("two_ranks_error", errors[0])
    else:
        both = out.get(0, []) + out.get(1, [])
        print("two_ranks", len(both), len(set(both)))
    print("mapped_after_two_ranks", int(mapped("libhdmlp-rpc")), int(mapped("libgrpc")))
"""


def fail(msg, res=None):
    sys.stderr.write(f"[pkg_bundle] FAIL: {msg}\n")
    if res is not None:
        sys.stderr.write(f"---- stdout:\n{res.stdout[-4000:]}\n---- stderr:\n{res.stderr[-4000:]}\n")
    sys.exit(1)


def run(cmd, env, timeout, cwd, what):
    print("[pkg_bundle] " + " ".join(cmd), flush=True)
    try:
        res = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True,
                             timeout=timeout)
    except subprocess.TimeoutExpired:
        fail(f"{what}: no result within {timeout} s")
    if res.returncode != 0:
        fail(f"{what}: exit {res.returncode}", res)
    return res


def clean_env():
    """The environment of a user who set nothing (no sanitizer runtime either)."""
    drop = ("HDMLP_PREFIX", "HDMLP_BUILD_DIR", "PKG_CONFIG_PATH", "PYTHONPATH", "LD_PRELOAD",
            "PYTHONMALLOC", "LD_LIBRARY_PATH", "PYTHONHOME", "HDMLP_PACK", "HDMLP_BENCH")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def make_dataset(scratch, pack):
    src = os.path.join(scratch, "files")
    for i in range(N_SAMPLES):
        d = os.path.join(src, f"class{i % 3}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"{i:04d}.bin"), "wb") as f:
            f.write((b"sample %06d " % i) * (20 + i % 50))
    out = os.path.join(scratch, "ds.hdmlp")
    res = subprocess.run([pack, "--quiet", "--force", "-o", out, src], capture_output=True,
                         text=True, timeout=120)
    if res.returncode != 0:
        fail("hdmlp-pack failed", res)
    return out


def venv(path, env):
    run([sys.executable, "-m", "venv", "--system-site-packages", path], env, 120, None,
        f"venv {path}")
    return os.path.join(path, "bin", "python")


def check_package(py, ds, env, cwd, where, ranks=2):
    res = run([py, "-c", CHECK, ds, str(ranks)], env, 240, cwd, f"using the package ({where})")
    lines = dict(l.split(" ", 1) for l in res.stdout.splitlines() if " " in l)
    site = os.path.dirname(os.path.dirname(py))
    if not lines.get("file", "").startswith(os.path.realpath(site)) and \
            not lines.get("file", "").startswith(site):
        fail(f"{where}: hdmlp imported from {lines.get('file')}, not from the venv {site}", res)
    if lines.get("one_rank") != f"{N_SAMPLES} {N_SAMPLES}":
        fail(f"{where}: one rank delivered (total, distinct) = {lines.get('one_rank')}, "
             f"expected {N_SAMPLES} {N_SAMPLES}", res)
    if lines.get("mapped_after_one_rank") != "0 0 0":
        fail(f"{where}: a single-rank process mapped (libmpi, libgrpc, libhdmlp-rpc) = "
             f"{lines.get('mapped_after_one_rank')}, expected none", res)
    if ranks == 2:
        if lines.get("two_ranks") != f"{N_SAMPLES} {N_SAMPLES}":
            fail(f"{where}: two ranks delivered {lines.get('two_ranks')} "
                 f"({lines.get('two_ranks_error', '')}), expected {N_SAMPLES} once each", res)
        if lines.get("mapped_after_two_ranks") != "1 1":
            fail(f"{where}: two ranks ran without loading libhdmlp-rpc.so and gRPC "
                 f"({lines.get('mapped_after_two_ranks')})", res)
    print(f"[pkg_bundle] {where}: OK", flush=True)
    return res


# Run by the installed package's python: hdmlp.pack() as the CLI run was, then a refused
# call; prints what the parent checks.
PACK = r"""
import sys
import hdmlp
files, out, missing = sys.argv[1:4]
hdmlp.pack(files, out, seed=7, chunk_size=16, quiet=True)
try:
    hdmlp.pack(missing, out + ".never", seed=7)
    print("no_error")
except hdmlp.NotFoundError as e:
    print("error", type(e).__name__, isinstance(e, FileNotFoundError), e.exit_status)
    print("message", str(e).split("] ", 1)[-1])
"""


def check_tools(venv_dir, files, env, cwd, where):
    """The venv's hdmlp-pack, hdmlp-bench, python -m hdmlp and hdmlp.pack()."""
    bindir = os.path.join(venv_dir, "bin")
    py = os.path.join(bindir, "python")
    for name in ("hdmlp-pack", "hdmlp-bench"):
        if not os.access(os.path.join(bindir, name), os.X_OK):
            fail(f"{where}: no {name} in {bindir} ({sorted(os.listdir(bindir))})")
    env = dict(env, PATH=f"{bindir}:/usr/bin:/bin", SOURCE_DATE_EPOCH="1700000000")
    res = run([py, "-m", "hdmlp", "where"], env, 60, cwd, f"python -m hdmlp where ({where})")
    site = run([py, "-c", "import hdmlp, os; print(os.path.dirname(hdmlp.__file__))"], env, 60,
               cwd, "package directory").stdout.strip()
    for name in ("hdmlp-pack", "hdmlp-bench"):
        if f"{name}: {os.path.join(site, 'bin', name)}" not in res.stdout:
            fail(f"{where}: {name} is not the one bundled in {site}/bin", res)
    out = os.path.join(cwd, f"tools-{os.path.basename(venv_dir)}")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    cli_ds, py_ds = os.path.join(out, "cli.hdmlp"), os.path.join(out, "py.hdmlp")
    missing = os.path.join(out, "missing")
    run(["hdmlp-pack", "-q", "--seed", "7", "--chunk-size", "16", "-o", cli_ds, files], env,
        120, cwd, f"hdmlp-pack from the venv's PATH ({where})")
    res = run([py, "-c", PACK, files, py_ds, missing], env, 120, cwd, f"hdmlp.pack ({where})")
    lines = dict(l.split(" ", 1) for l in res.stdout.splitlines() if " " in l)
    cli_err = subprocess.run(["hdmlp-pack", "-o", missing + ".never", missing], env=env,
                             cwd=cwd, capture_output=True, text=True, timeout=60)
    if lines.get("error") != "NotFoundError True 1" or \
            lines.get("message") != cli_err.stderr.strip():
        fail(f"{where}: hdmlp.pack of a missing input should raise NotFoundError with the "
             f"CLI's message {cli_err.stderr.strip()!r}; got {lines}", res)
    for name in sorted(os.listdir(cli_ds)):
        with open(os.path.join(cli_ds, name), "rb") as a, \
                open(os.path.join(py_ds, name), "rb") as b:
            if a.read() != b.read():
                fail(f"{where}: hdmlp.pack and hdmlp-pack differ in {name}")
    if sorted(os.listdir(cli_ds)) != sorted(os.listdir(py_ds)):
        fail(f"{where}: hdmlp.pack made {os.listdir(py_ds)}, the CLI {os.listdir(cli_ds)}")
    for ds in (cli_ds, py_ds):
        res = run(["hdmlp-pack", "--verify", ds], env, 60, cwd, f"hdmlp-pack --verify {ds}")
        if res.stdout != "OK\n":
            fail(f"{where}: --verify {ds} printed {res.stdout!r}", res)
    res = run(["hdmlp-bench", py_ds, "--memory", "4M", "--epochs", "1", "--json"], env, 120,
              cwd, f"hdmlp-bench from the venv's PATH ({where})")
    try:
        delivered = json.loads(res.stdout)["samples"]
    except (ValueError, KeyError):
        delivered = None
    if delivered != N_SAMPLES:
        fail(f"{where}: hdmlp-bench did not deliver {N_SAMPLES} samples", res)
    ldd = run(["ldd", os.path.join(site, "bin", "hdmlp-bench")], env, 60, cwd, "ldd")
    lib = next((l for l in ldd.stdout.splitlines() if "libhdmlp.so.0" in l), "")
    if os.path.join(site, "bin", "..", "libhdmlp.so.0") not in lib and \
            os.path.join(site, "libhdmlp.so.0") not in lib:
        fail(f"{where}: the bundled hdmlp-bench does not use the bundled libhdmlp: {lib!r}",
             ldd)
    shutil.rmtree(out, ignore_errors=True)
    print(f"[pkg_bundle] {where}: tools OK", flush=True)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: pkg_bundle.py SCRATCH   (HDMLP_PACK=PATH/TO/hdmlp-pack)")
    pack = os.environ.get("HDMLP_PACK")
    if not pack or not os.access(pack, os.X_OK):
        fail("HDMLP_PACK (the hdmlp-pack binary) not set")
    for mod in ("build", "wheel", "setuptools"):
        res = subprocess.run([sys.executable, "-c", f"import {mod}"], capture_output=True)
        if res.returncode != 0:
            fail(f"Python module {mod} missing: apt-get install python3-{mod} "
                 "(bash .ci/deps.sh)")
    scratch = os.path.abspath(sys.argv[1])
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    env = clean_env()
    ds = make_dataset(scratch, pack)
    files = os.path.join(scratch, "files")

    # 1. pip install from a copy of the source tree, nothing set.
    src = os.path.join(scratch, "src")
    os.makedirs(src)
    ignore = shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__")
    for part in SOURCE_PARTS:
        p = os.path.join(ROOT, part)
        if os.path.isdir(p):
            shutil.copytree(p, os.path.join(src, part), ignore=ignore)
        else:
            shutil.copy2(p, os.path.join(src, part))
    py1 = venv(os.path.join(scratch, "venv1"), env)
    run([py1, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-index",
         os.path.join(src, "python")], env, 600, scratch, "pip install ./python (no variables)")
    check_package(py1, ds, env, scratch, "pip install ./python")
    check_tools(os.path.dirname(os.path.dirname(py1)), files, env, scratch,
                "pip install ./python")
    # The same from the root of the tree (its setup.py runs python/setup.py).
    py3 = venv(os.path.join(scratch, "venv3"), env)
    run([py3, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-index", src], env,
        600, scratch, "pip install . (the repository root, no variables)")
    check_package(py3, ds, env, scratch, "pip install . from the root", ranks=1)
    run([os.path.join(scratch, "venv3", "bin", "hdmlp-pack"), "--version"], env, 60, scratch,
        "hdmlp-pack of pip install . from the root")

    # 2. A wheel, the build tree deleted, installed into a venv elsewhere.
    dist = os.path.join(scratch, "dist")
    run([sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", dist,
         os.path.join(src, "python")], env, 600, scratch, "python3 -m build --wheel")
    wheels = [f for f in os.listdir(dist) if f.endswith(".whl")]
    if len(wheels) != 1:
        fail(f"expected one wheel in {dist}, found {wheels}")
    shutil.rmtree(src)
    other = os.path.join(scratch, "elsewhere", "deeper")
    os.makedirs(other)
    py2 = venv(os.path.join(other, "venv2"), env)
    run([py2, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
         os.path.join(dist, wheels[0])], env, 300, other, "pip install the wheel")
    check_package(py2, ds, env, other, "wheel in a second venv, build tree deleted")
    check_tools(os.path.dirname(os.path.dirname(py2)), files, env, other,
                "wheel in a second venv, build tree deleted")

    # 3. The module missing: one rank still works, two ranks name it.
    site = subprocess.run([py2, "-c", "import hdmlp, os; print(os.path.dirname(hdmlp.__file__))"],
                          env=env, cwd=other, capture_output=True, text=True).stdout.strip()
    os.remove(os.path.join(site, "libhdmlp-rpc.so"))
    res = run([py2, "-c", CHECK, ds, "2"], env, 120, other, "without libhdmlp-rpc.so")
    err = next((l for l in res.stdout.splitlines() if l.startswith("two_ranks_error")), "")
    if "libhdmlp-rpc.so" not in err or "could not be loaded" not in err:
        fail(f"without the module, a two-rank loader should fail naming libhdmlp-rpc.so; "
             f"got: {err or res.stdout}", res)
    if f"one_rank {N_SAMPLES} {N_SAMPLES}" not in res.stdout:
        fail("without the module, a single-rank loader should still work", res)
    print(f"[pkg_bundle] without libhdmlp-rpc.so: {err.split(' ', 1)[1][:200]}")
    shutil.rmtree(scratch, ignore_errors=True)
    print("[pkg_bundle] PASS")


if __name__ == "__main__":
    main()
