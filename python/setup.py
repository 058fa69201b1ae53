"""Builds the hdmlp package (pure Python + the _hdmlp C extension) with setuptools.

The extension links against an existing libhdmlp; it never compiles the library itself.
Where the library is found, in order:
  HDMLP_PREFIX=DIR      an install prefix (absolute path) (`cmake --install BUILD --prefix DIR`):
                        DIR/include/hdmlp.h and DIR/lib*/libhdmlp.so
  HDMLP_BUILD_DIR=DIR   a CMake build tree of this repository (absolute; libhdmlp.so in DIR,
                        the header from ../include)
  pkg-config hdmlp      (PKG_CONFIG_PATH=DIR/lib/pkgconfig for a prefix)
The library's directory is recorded as the extension's RPATH, so no LD_LIBRARY_PATH is
needed. Offline (no PyPI), in a venv made with --system-site-packages:

    /usr/bin/python3 -m venv --system-site-packages .venv
    HDMLP_PREFIX=/opt/hdmlp .venv/bin/pip install --no-build-isolation --no-index ./python
"""
import glob
import os
import shlex
import subprocess
import sys

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = ["src/py_module.c", "src/py_errors.c", "src/py_args.c", "src/py_dataset.c",
           "src/py_batch.c", "src/py_loader.c", "src/py_config.c", "src/py_stats.c",
           "src/py_resume.c", "src/py_wait.c"]


def fail(msg):
    sys.stderr.write(f"hdmlp setup.py: {msg}\n")
    sys.exit(1)


def find_library():
    """(include_dirs, library_dirs) for libhdmlp."""
    prefix = os.environ.get("HDMLP_PREFIX")
    if prefix:
        if not os.path.isabs(prefix):
            fail(f"HDMLP_PREFIX={prefix}: give an absolute path (pip builds in another directory)")
        inc = os.path.join(prefix, "include")
        libs = [d for d in (glob.glob(os.path.join(prefix, "lib*")) +
                            glob.glob(os.path.join(prefix, "lib", "*-linux-gnu")))
                if glob.glob(os.path.join(d, "libhdmlp.so*"))]
        if not os.path.isfile(os.path.join(inc, "hdmlp.h")) or not libs:
            fail(f"HDMLP_PREFIX={prefix}: no include/hdmlp.h or lib*/libhdmlp.so there "
                 "(run `cmake --install BUILD --prefix DIR` first)")
        return [inc], [libs[0]]
    build = os.environ.get("HDMLP_BUILD_DIR")
    if build:
        if not os.path.isabs(build):
            fail(f"HDMLP_BUILD_DIR={build}: give an absolute path (pip builds in another "
                 "directory)")
        inc = os.path.join(HERE, "..", "include")
        if not glob.glob(os.path.join(build, "libhdmlp.so*")):
            fail(f"HDMLP_BUILD_DIR={build}: no libhdmlp.so there (build target hdmlp first)")
        if not os.path.isfile(os.path.join(inc, "hdmlp.h")):
            fail(f"HDMLP_BUILD_DIR needs the source tree's include/ beside python/ ({inc})")
        return [os.path.abspath(inc)], [build]
    try:
        cflags = subprocess.run(["pkg-config", "--cflags-only-I", "hdmlp"], check=True,
                                capture_output=True, text=True).stdout
        ldflags = subprocess.run(["pkg-config", "--libs-only-L", "hdmlp"], check=True,
                                 capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        fail("libhdmlp not found: set HDMLP_PREFIX (an install prefix) or HDMLP_BUILD_DIR "
             "(a CMake build tree), or make `pkg-config hdmlp` work")
    incs = [f[2:] for f in shlex.split(cflags) if f.startswith("-I")]
    libdirs = [f[2:] for f in shlex.split(ldflags) if f.startswith("-L")]
    return incs, libdirs


include_dirs, library_dirs = find_library()

setup(
    name="hdmlp",
    version="0.1.0",
    description="Chunked datasets and a batched random-access loader for training",
    packages=["hdmlp"],
    python_requires=">=3.9",
    ext_modules=[Extension(
        "hdmlp._hdmlp",
        sources=SOURCES,
        include_dirs=include_dirs,
        library_dirs=library_dirs,
        runtime_library_dirs=library_dirs,
        libraries=["hdmlp", "pthread"],
        extra_compile_args=["-std=c11", "-D_GNU_SOURCE", "-fvisibility=hidden", "-Wall",
                            "-Wextra"],
    )],
)
