"""The package installs with pip, offline, into a venv with the system site packages
(python/setup.py linking the already-built libhdmlp), with the console scripts hdmlp-pack
and hdmlp-bench running that build's tools; without the `wheel` package pip's failure says
what to do. Set HDMLP_TEST_SKIP_PIP=1 to skip. (tests/pkg/pkg_bundle.py: the bundled
library and tools, wheels.)"""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import SOURCE_DIR


def test_pip_install_into_a_venv(tmp_path, small_ds):
    if os.environ.get("HDMLP_TEST_SKIP_PIP") == "1":
        pytest.skip("HDMLP_TEST_SKIP_PIP=1")
    lib_dir = os.environ.get("HDMLP_LIB_DIR")
    if not lib_dir:
        pytest.skip("HDMLP_LIB_DIR (directory of the built libhdmlp.so) not set")
    # a copy, so pip's in-tree build leaves nothing in the source tree
    src = tmp_path / "src"
    shutil.copytree(os.path.join(SOURCE_DIR, "python"), src / "python",
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    shutil.copytree(os.path.join(SOURCE_DIR, "include"), src / "include")
    # the size grammar the extension compiles in (python/setup.py, UNITS)
    (src / "loader" / "config").mkdir(parents=True)
    for name in ("loader_units.c", "loader_units.h"):
        shutil.copy2(os.path.join(SOURCE_DIR, "loader", "config", name),
                     src / "loader" / "config" / name)
    env = dict(os.environ, HDMLP_BUILD_DIR=os.path.abspath(lib_dir))
    env.pop("PYTHONPATH", None)
    # venv, pip and the programs they run (compiler, lsb_release, ...) are not hdmlp's: no
    # sanitizer runtime for them (ASan builds preload one; only the last step needs it)
    tool_env = {k: v for k, v in env.items() if k not in ("LD_PRELOAD", "PYTHONMALLOC")}
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   env=tool_env, check=True, timeout=120)
    res = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-build-isolation",
                          "--no-index", str(src / "python")], env=tool_env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    code = ("import hdmlp, hdmlp.torch, sys\n"
            "assert 'site-packages' in hdmlp.__file__, hdmlp.__file__\n"
            "ld = hdmlp.Loader(sys.argv[1], 64, '50%', seed=1, epochs=1)\n"
            "print(sum(len(b) for b in ld))\n")
    res = subprocess.run([str(venv / "bin" / "python"), "-c", code, small_ds.path], env=env,
                         capture_output=True, text=True, timeout=60, cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert int(res.stdout) == small_ds.n

    # The tools: console scripts on the venv's PATH, running HDMLP_BUILD_DIR's executables
    # (not $HDMLP_PACK, which is not set for them), and hdmlp.pack().
    env = {k: v for k, v in env.items() if k not in ("HDMLP_PACK", "HDMLP_BENCH")}
    env["PATH"] = f"{venv / 'bin'}:/usr/bin:/bin"
    res = subprocess.run([str(venv / "bin" / "python"), "-m", "hdmlp", "where"], env=env,
                         capture_output=True, text=True, timeout=60, cwd=str(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    build = os.path.abspath(lib_dir)
    assert f"hdmlp-pack: {build}/packer/hdmlp-pack" in res.stdout, res.stdout
    assert f"hdmlp-bench: {build}/loader/hdmlp-bench" in res.stdout, res.stdout
    files = tmp_path / "files"
    for i in range(50):
        (files / f"c{i % 2}").mkdir(parents=True, exist_ok=True)
        (files / f"c{i % 2}" / f"{i}.bin").write_bytes(b"%d" % i * (i + 1))
    res = subprocess.run(["hdmlp-pack", "-q", "-o", str(tmp_path / "cli.hdmlp"), str(files)],
                         env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    code = ("import sys, hdmlp\n"
            "hdmlp.pack(sys.argv[1], sys.argv[2], chunk_size=4, quiet=True)\n"
            "try:\n"
            "    hdmlp.pack(sys.argv[1], sys.argv[2])\n"
            "except hdmlp.ExistsError as e:\n"
            "    print(e.detail)\n")
    res = subprocess.run([str(venv / "bin" / "python"), "-c", code, str(files),
                          str(tmp_path / "py.hdmlp")], env=env, capture_output=True, text=True,
                         timeout=60, cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert "already exists (use --force" in res.stdout, res.stdout
    for ds in ("cli.hdmlp", "py.hdmlp"):
        res = subprocess.run(["hdmlp-pack", "--verify", str(tmp_path / ds)], env=env,
                             capture_output=True, text=True, timeout=60)
        assert (res.returncode, res.stdout) == (0, "OK\n"), res.stderr
    res = subprocess.run(["hdmlp-bench", str(tmp_path / "py.hdmlp"), "--memory", "1M",
                          "--epochs", "1"], env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "50" in res.stdout, res.stdout + res.stderr


def test_pip_without_wheel_says_what_to_do(tmp_path):
    """A venv of its own (no system site packages) has setuptools but not `wheel`: pip's
    build then stops with a message naming the missing package and the commands that work,
    not setuptools' bare "invalid command 'bdist_wheel'"."""
    if os.environ.get("HDMLP_TEST_SKIP_PIP") == "1":
        pytest.skip("HDMLP_TEST_SKIP_PIP=1")
    src = tmp_path / "src"
    shutil.copytree(os.path.join(SOURCE_DIR, "python"), src / "python",
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    shutil.copytree(os.path.join(SOURCE_DIR, "include"), src / "include")
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "PYTHONMALLOC", "PYTHONPATH")}
    venv = tmp_path / "venv"
    res = subprocess.run([sys.executable, "-m", "venv", str(venv)], env=env,
                         capture_output=True, text=True, timeout=120)
    if res.returncode != 0:
        pytest.skip(f"python3 -m venv without system site packages failed: {res.stderr}")
    py = str(venv / "bin" / "python")
    have = subprocess.run([py, "-c", "import setuptools, wheel"], env=env, capture_output=True)
    if have.returncode == 0:
        pytest.skip("this venv has the wheel package")
    if subprocess.run([py, "-c", "import setuptools"], env=env,
                      capture_output=True).returncode != 0:
        pytest.skip("this venv has no setuptools")
    res = subprocess.run([py, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                          str(src / "python")], env=env, capture_output=True, text=True,
                         timeout=300)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    assert "the Python package 'wheel' is missing" in out, out
    assert "--system-site-packages" in out and "pip install wheel" in out, out
