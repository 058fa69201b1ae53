"""The package installs with pip, offline, into a venv with the system site packages
(python/setup.py linking the already-built libhdmlp). Set HDMLP_TEST_SKIP_PIP=1 to skip."""
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
