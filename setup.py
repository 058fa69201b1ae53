"""`pip install .` from the repository root: the same package as `pip install ./python`.

Everything is in python/setup.py (where libhdmlp comes from, bundling, the wheel); this
file only runs it from here. setup.cfg keeps setuptools' build directory (build-python/)
apart from a CMake build tree in build/.
"""
import os
import runpy

runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "python", "setup.py"),
               run_name="__main__")
