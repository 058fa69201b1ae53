"""Builds the hdmlp package (pure Python + the _hdmlp C extension) with setuptools.

Where libhdmlp comes from, in order:
  HDMLP_PREFIX=DIR      an install prefix (absolute path) (`cmake --install BUILD --prefix DIR`):
                        DIR/include/hdmlp.h and DIR/lib*/libhdmlp.so
  HDMLP_BUILD_DIR=DIR   a CMake build tree of this repository (absolute; libhdmlp.so in DIR,
                        the header from ../include)
  pkg-config hdmlp      (PKG_CONFIG_PATH=DIR/lib/pkgconfig for a prefix)
These link the extension to that library and record its directory as the RUNPATH, and
the package runs that prefix's (or build tree's) hdmlp-pack and hdmlp-bench.
  otherwise             the library is compiled here with CMake from this source tree (in
                        setuptools' build_temp, never in the source tree) and bundled: the
                        package gets libhdmlp.so.0 and the module libhdmlp-rpc.so beside the
                        extension, whose RUNPATH is $ORIGIN, and the executables hdmlp-pack
                        and hdmlp-bench in hdmlp/bin/ (RUNPATH $ORIGIN/..), so the package (or
                        a wheel made of it) works wherever it is installed.
The console scripts hdmlp-pack and hdmlp-bench (and `python -m hdmlp pack|bench`) run
those executables; hdmlp.pack() runs hdmlp-pack (hdmlp/pack.py). hdmlp/_toolpaths.py,
written here, records where they are.
Offline (no PyPI), in a venv made with --system-site-packages:

    /usr/bin/python3 -m venv --system-site-packages .venv
    .venv/bin/pip install --no-build-isolation --no-index ./python
    /usr/bin/python3 -m build --no-isolation --wheel ./python     # a wheel, in python/dist

pip builds a wheel even to install: without the Python package `wheel` (Debian's
python3-wheel; a pyenv or other Python may lack it) setuptools fails with "invalid
command 'bdist_wheel'"; check_wheel() says so and what to run instead.
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
# The size grammar hdmlp-bench and hdmlp-pack also read (libc only, not part of libhdmlp's
# API), from the source tree; compiled from a copy in build_temp (BuildExt.add_units).
UNITS = ("loader/config/loader_units.c", "loader/config/loader_units.h")
# What a bundled build copies next to the extension (file name in the CMake build tree →
# name in the package): the library under its SONAME, and the distributed-stack module.
BUNDLED = [("libhdmlp.so.0", "libhdmlp.so.0"), ("libhdmlp-rpc.so", "libhdmlp-rpc.so")]
# The executables a bundled build copies into hdmlp/bin/ (path in the CMake build tree).
TOOLS = {"hdmlp-pack": "packer/hdmlp-pack", "hdmlp-bench": "loader/hdmlp-bench"}


def fail(msg):
    sys.stderr.write(f"hdmlp setup.py: {msg}\n")
    sys.exit(1)


def check_wheel():
    """A clear message instead of setuptools' "invalid command 'bdist_wheel'"."""
    if not {"bdist_wheel", "dist_info", "editable_wheel"} & set(sys.argv[1:]):
        return
    try:
        import wheel  # noqa: F401
        return
    except ImportError:
        pass
    try:
        import setuptools.command.bdist_wheel  # noqa: F401  (setuptools >= 70.1 has its own)
        return
    except ImportError:
        pass
    import setuptools
    fail(f"""the Python package 'wheel' is missing for {sys.executable} (setuptools
{setuptools.__version__}): pip builds a wheel even to install, and without it setuptools
stops with "invalid command 'bdist_wheel'". Either
  - use Debian's Python and its packages (apt-get install python3-wheel python3-venv),
    in a venv that sees them (--system-site-packages):
      /usr/bin/python3 -m venv --system-site-packages .venv
      .venv/bin/pip install --no-build-isolation --no-index ./python
  - or install it for this Python and run pip again:
      {sys.executable} -m pip install wheel     (needs PyPI, or --no-index a wheel file)
  - or, with PyPI reachable, leave out --no-build-isolation: pip then builds in an
    isolated environment with setuptools and wheel from PyPI.""")


def tools_in(directory, layout):
    """{tool: absolute path} of the executables present under directory."""
    found = {}
    for name, rel in layout.items():
        path = os.path.join(directory, rel)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            found[name] = os.path.abspath(path)
    return found


def prefix_tools(prefix):
    return tools_in(prefix, {name: os.path.join("bin", name) for name in TOOLS})


def find_installed():
    """(include_dirs, library_dirs, {tool: path}) of an existing libhdmlp, or None to build
    one here."""
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
        return [inc], [libs[0]], prefix_tools(prefix)
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
        return [inc], [build], tools_in(build, TOOLS)
    try:
        cflags = subprocess.run(["pkg-config", "--cflags-only-I", "hdmlp"], check=True,
                                capture_output=True, text=True).stdout
        ldflags = subprocess.run(["pkg-config", "--libs-only-L", "hdmlp"], check=True,
                                 capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    incs = [f[2:] for f in shlex.split(cflags) if f.startswith("-I")]
    libdirs = [f[2:] for f in shlex.split(ldflags) if f.startswith("-L")]
    tools = {}
    for var in ("bindir", "prefix"):
        try:
            d = subprocess.run(["pkg-config", f"--variable={var}", "hdmlp"], check=True,
                               capture_output=True, text=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            continue
        if d:
            d = os.path.realpath(d if var == "bindir" else os.path.join(d, "bin"))
            tools = tools_in(d, {name: name for name in TOOLS})
            if tools:
                break
    return incs, libdirs, tools


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
            tools = self.bundle()
        else:
            tools = FOUND[2]
            missing = sorted(set(TOOLS) - set(tools))
            if missing:
                print(f"hdmlp setup.py: note: {', '.join(missing)} not found beside that "
                      "libhdmlp: the package will look for them on PATH (or $HDMLP_PACK, "
                      "$HDMLP_BENCH)", flush=True)
        self.write_toolpaths(tools)
        self.add_units()
        super().run()

    def add_units(self):
        dest = os.path.abspath(os.path.join(self.build_temp, "units"))
        os.makedirs(dest, exist_ok=True)
        for rel in UNITS:
            src = os.path.join(ROOT, rel)
            if not os.path.isfile(src):
                fail(f"{src} not found: the extension compiles it in (install from a checkout "
                     "of the repository)")
            shutil.copy2(src, os.path.join(dest, os.path.basename(rel)))
        for ext in self.extensions:
            ext.sources.append(os.path.join(dest, os.path.basename(UNITS[0])))
            ext.include_dirs.append(dest)

    def write_toolpaths(self, tools):
        dest = os.path.dirname(self.get_ext_fullpath("hdmlp._hdmlp"))
        os.makedirs(dest, exist_ok=True)
        with open(os.path.join(dest, "_toolpaths.py"), "w") as f:
            f.write('"""Written by python/setup.py: where the package\'s hdmlp-pack and '
                    'hdmlp-bench are\n(relative paths: relative to this directory)."""\n')
            f.write(f"TOOLS = {tools!r}\n")

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
        # No Python extension or tests: the library, its module and the two CLIs. RUNPATH
        # from the start (BUILD_WITH_INSTALL_RPATH), as they are copied as they are:
        # $ORIGIN for the libraries, $ORIGIN/.. for the executables in hdmlp/bin/.
        run([cmake, "-S", ROOT, "-B", tree, "-DCMAKE_BUILD_TYPE=Release",
             "-DHDMLP_PYTHON=OFF", "-DBUILD_TESTING=OFF", "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON",
             "-DHDMLP_TOOLS_RPATH=$ORIGIN/.."])
        jobs = str(os.cpu_count() or 1)
        run([cmake, "--build", tree, "-j", jobs, "--target", "hdmlp", "hdmlp_rpc_module",
             *TOOLS])
        dest = os.path.dirname(self.get_ext_fullpath("hdmlp._hdmlp"))
        os.makedirs(os.path.join(dest, "bin"), exist_ok=True)
        for src, name in BUNDLED:
            shutil.copy2(os.path.join(tree, src), os.path.join(dest, name))
        tools = {}
        for name, src in TOOLS.items():
            shutil.copy2(os.path.join(tree, src), os.path.join(dest, "bin", name))
            tools[name] = f"bin/{name}"
        for ext in self.extensions:
            ext.include_dirs.append(os.path.join(ROOT, "include"))
            ext.library_dirs.append(tree)
            ext.runtime_library_dirs.append("$ORIGIN")
        return tools


check_wheel()
FOUND = find_installed()
include_dirs, library_dirs = FOUND[:2] if FOUND is not None else ([], [])

setup(
    name="hdmlp",
    version="0.1.0",
    description="Chunked datasets and a batched random-access loader for training",
    packages=["hdmlp"],
    package_dir={"hdmlp": os.path.normpath(os.path.join(REL, "hdmlp"))},
    python_requires=">=3.9",
    cmdclass={"build_ext": BuildExt},
    entry_points={"console_scripts": ["hdmlp-pack = hdmlp.__main__:pack_main",
                                      "hdmlp-bench = hdmlp.__main__:bench_main"]},
    ext_modules=[Extension(
        "hdmlp._hdmlp",
        sources=[os.path.normpath(os.path.join(REL, src)) for src in SOURCES],
        include_dirs=list(include_dirs),
        library_dirs=list(library_dirs),
        runtime_library_dirs=list(library_dirs),
        libraries=["hdmlp", "pthread", "m"],
        extra_compile_args=["-std=c11", "-D_GNU_SOURCE", "-fvisibility=hidden", "-Wall",
                            "-Wextra"],
    )],
)
