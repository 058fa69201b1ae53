"""Builds the hdmlp package (pure Python + the _hdmlp C extension) with setuptools.

Where libhdmlp comes from, in order:
  HDMLP_PREFIX=DIR      an install prefix (absolute path) (`cmake --install BUILD --prefix DIR`):
                        DIR/include/hdmlp.h and DIR/lib*/libhdmlp.so
  HDMLP_BUILD_DIR=DIR   a CMake build tree of this repository (absolute; libhdmlp.so in DIR,
                        the header from ../include)
  pkg-config hdmlp      (PKG_CONFIG_PATH=DIR/lib/pkgconfig for a prefix)
These link the extension to that library and record its directory as the RUNPATH.
  otherwise             the library is compiled here with CMake from this source tree (in
                        setuptools' build_temp, never in the source tree) and bundled: the
                        package gets libhdmlp.so.0 and the module libhdmlp-rpc.so beside the
                        extension, whose RUNPATH is $ORIGIN, so the package (or a wheel made
                        of it) works wherever it is installed.
Offline (no PyPI), in a venv made with --system-site-packages:

    /usr/bin/python3 -m venv --system-site-packages .venv
    .venv/bin/pip install --no-build-isolation --no-index ./python
    /usr/bin/python3 -m build --no-isolation --wheel ./python     # a wheel, in python/dist
"""
import glob
import os
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# setuptools takes paths relative to the directory it runs in: python/ itself, or the
# repository root, whose setup.py runs this file (`pip install .` there).
REL = os.path.normpath(os.path.relpath(HERE))
SOURCES = ["src/py_module.c", "src/py_state.c", "src/py_errors.c", "src/py_args.c", "src/py_dataset.c",
           "src/py_dataset_read.c", "src/py_dataset_props.c", "src/py_batch.c",
           "src/py_loader.c", "src/py_loader_fetch.c", "src/py_loader_iter.c",
           "src/py_config.c", "src/py_stats.c", "src/py_resume.c", "src/py_wait.c",
           "src/py_ring.c", "src/py_image.c"]
# What a bundled build copies next to the extension (file name in the CMake build tree →
# name in the package): the library under its SONAME, and the distributed-stack module.
BUNDLED = [("libhdmlp.so.0", "libhdmlp.so.0"), ("libhdmlp-rpc.so", "libhdmlp-rpc.so")]


def fail(msg):
    sys.stderr.write(f"hdmlp setup.py: {msg}\n")
    sys.exit(1)


def find_installed():
    """(include_dirs, library_dirs) of an existing libhdmlp, or None to build one here."""
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
        inc = os.path.join(ROOT, "include")
        if not glob.glob(os.path.join(build, "libhdmlp.so*")):
            fail(f"HDMLP_BUILD_DIR={build}: no libhdmlp.so there (build target hdmlp first)")
        if not os.path.isfile(os.path.join(inc, "hdmlp.h")):
            fail(f"HDMLP_BUILD_DIR needs the source tree's include/ beside python/ ({inc})")
        return [inc], [build]
    try:
        cflags = subprocess.run(["pkg-config", "--cflags-only-I", "hdmlp"], check=True,
                                capture_output=True, text=True).stdout
        ldflags = subprocess.run(["pkg-config", "--libs-only-L", "hdmlp"], check=True,
                                 capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    incs = [f[2:] for f in shlex.split(cflags) if f.startswith("-I")]
    libdirs = [f[2:] for f in shlex.split(ldflags) if f.startswith("-L")]
    return incs, libdirs


def run(cmd):
    print("hdmlp setup.py: " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    try:
        subprocess.run(cmd, check=True)
    except OSError as e:
        fail(f"cannot run {cmd[0]} ({e.strerror}): building the bundled libhdmlp needs "
             "CMake and a C compiler (or point HDMLP_PREFIX / HDMLP_BUILD_DIR at a built one)")
    except subprocess.CalledProcessError as e:
        fail(f"`{' '.join(cmd)}` failed (exit {e.returncode}); see its output above. The "
             "bundled libhdmlp needs the build dependencies of the README (bash .ci/deps.sh), "
             "or point HDMLP_PREFIX / HDMLP_BUILD_DIR at a built one")


class BuildExt(build_ext):
    """Builds and bundles libhdmlp with CMake when no installed one was found."""

    def run(self):
        if FOUND is None:
            self.bundle()
        super().run()

    def bundle(self):
        if not os.path.isfile(os.path.join(ROOT, "CMakeLists.txt")):
            fail(f"libhdmlp not found (HDMLP_PREFIX, HDMLP_BUILD_DIR, pkg-config hdmlp) and "
                 f"no source tree to build it from at {ROOT}: install from a checkout of the "
                 "repository, or set HDMLP_PREFIX to an install prefix")
        cmake = shutil.which("cmake")
        if cmake is None:
            fail("libhdmlp not found (HDMLP_PREFIX, HDMLP_BUILD_DIR, pkg-config hdmlp) and "
                 "cmake is not on PATH to build it: apt-get install cmake (bash .ci/deps.sh)")
        tree = os.path.abspath(os.path.join(self.build_temp, "libhdmlp"))
        # No Python extension, tests or CLIs: the library and its module only. RUNPATH
        # $ORIGIN from the start (BUILD_WITH_INSTALL_RPATH), as they are copied as they are.
        run([cmake, "-S", ROOT, "-B", tree, "-DCMAKE_BUILD_TYPE=Release",
             "-DHDMLP_PYTHON=OFF", "-DBUILD_TESTING=OFF", "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON"])
        jobs = str(os.cpu_count() or 1)
        run([cmake, "--build", tree, "-j", jobs, "--target", "hdmlp", "hdmlp_rpc_module"])
        dest = os.path.dirname(self.get_ext_fullpath("hdmlp._hdmlp"))
        os.makedirs(dest, exist_ok=True)
        for src, name in BUNDLED:
            shutil.copy2(os.path.join(tree, src), os.path.join(dest, name))
        for ext in self.extensions:
            ext.include_dirs.append(os.path.join(ROOT, "include"))
            ext.library_dirs.append(tree)
            ext.runtime_library_dirs.append("$ORIGIN")


FOUND = find_installed()
include_dirs, library_dirs = FOUND if FOUND is not None else ([], [])

setup(
    name="hdmlp",
    version="0.1.0",
    description="Chunked datasets and a batched random-access loader for training",
    packages=["hdmlp"],
    package_dir={"hdmlp": os.path.normpath(os.path.join(REL, "hdmlp"))},
    python_requires=">=3.9",
    cmdclass={"build_ext": BuildExt},
    ext_modules=[Extension(
        "hdmlp._hdmlp",
        sources=[os.path.normpath(os.path.join(REL, src)) for src in SOURCES],
        include_dirs=list(include_dirs),
        library_dirs=list(library_dirs),
        runtime_library_dirs=list(library_dirs),
        libraries=["hdmlp", "pthread"],
        extra_compile_args=["-std=c11", "-D_GNU_SOURCE", "-fvisibility=hidden", "-Wall",
                            "-Wextra"],
    )],
)
