"""python -m hdmlp pack ARGS... | bench ARGS...: the package's hdmlp-pack / hdmlp-bench.

The console scripts hdmlp-pack and hdmlp-bench that pip installs are pack_main and
bench_main: each replaces itself with the executable (hdmlp.pack.tool_path says which).
"""
import sys

from .pack import run_tool

USAGE = """usage: python -m hdmlp pack [hdmlp-pack options...]
       python -m hdmlp bench [hdmlp-bench options...]
       python -m hdmlp where          (the executables this package runs)
"""
TOOLS = {"pack": "hdmlp-pack", "bench": "hdmlp-bench"}


def pack_main():
    return run_tool("hdmlp-pack", sys.argv[1:])


def bench_main():
    return run_tool("hdmlp-bench", sys.argv[1:])


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0 if argv else 2
    if argv[0] == "where":
        from .pack import tool_path
        from . import Error
        status = 0
        for name in TOOLS.values():
            try:
                print(f"{name}: {tool_path(name)}")
            except Error as e:
                print(f"{name}: {e}")
                status = 1
        return status
    if argv[0] not in TOOLS:
        sys.stderr.write(f"python -m hdmlp: unknown command {argv[0]!r}\n{USAGE}")
        return 2
    return run_tool(TOOLS[argv[0]], argv[1:])


if __name__ == "__main__":
    sys.exit(main())
