#!/usr/bin/env python3
"""Layering rules of README "Layout", checked from the include lines of the tracked sources
and from the symbols of the built objects (nm). Usage:

    python3 .ci/check_layers.py [BUILD_DIR]

Without BUILD_DIR: $HDMLP_BUILD, else build-ci/ or build/ when present; without any build
directory the object rules are skipped (said on stderr), the include rules still run.
Exit status 1 and one message per broken rule (with the offending file and line or symbol).
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.chdir(ROOT)
failures = []


def fail(rule, detail):
    failures.append((rule, detail))


# ---- sources and their include lines -------------------------------------------------------
files = [f for f in subprocess.check_output(["git", "ls-files", "*.c", "*.h"], text=True).split()
         if not f.startswith("tests/fuzz/corpus/")]
by_name = {}
for f in files:
    by_name.setdefault(os.path.basename(f), []).append(f)

INC = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def includes(path):
    out = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            m = INC.match(line)
            if m:
                out.append((n, m.group(1) == "<", m.group(2)))
    return out


def resolve(src, name):
    """The tracked file a quoted include names, or None (generated or system header)."""
    for cand in (os.path.join(os.path.dirname(src), name), os.path.join("tests", name),
                 os.path.join("include", name)):
        cand = os.path.normpath(cand)
        if cand in by_name.get(os.path.basename(name), []):
            return cand
    hits = by_name.get(os.path.basename(name), [])
    return hits[0] if len(hits) == 1 and "/" not in name else None


def folder(path):
    """The layering unit a file belongs to."""
    parts = path.split("/")
    if parts[0] == "format":
        return "format/base" if parts[1] == "base" else "format"
    if parts[0] == "loader":
        return "loader/" + parts[1] if len(parts) > 2 else "loader"
    if parts[0] == "packer":
        return "packer/cli" if parts[1] == "cli" else "packer"
    if parts[0] == "python":
        return "python"
    if parts[0] == "tests":
        return "/".join(parts[:-1])
    return parts[0]


inc = {f: includes(f) for f in files}
edges = {}  # file -> [(line, included tracked file)]
for f in files:
    edges[f] = []
    for n, angle, name in inc[f]:
        if not angle:
            r = resolve(f, name)
            if r is not None:
                edges[f].append((n, r))

# The data library (CMake target hdmlp_data): the only part of the library hdmlp-pack links.
DATA = ["format/base", "format", "loader/dataset", "loader/objstore"]
LIBRARY = ["format/base", "format", "loader/config", "loader/protocol", "loader/io",
           "loader/objstore", "loader/dataset", "loader/cost", "loader/tiers", "loader/ranks",
           "loader/image", "loader/runtime", "packer", "rpc"]


def quoted_folders(f):
    return {folder(t) for _, t in edges[f]} - {folder(f)}


# Rule: the public header includes only <stddef.h> and <stdint.h>.
for n, angle, name in inc["include/hdmlp.h"]:
    if not (angle and name in ("stddef.h", "stdint.h")):
        fail("public header: only <stddef.h>, <stdint.h>", f"include/hdmlp.h:{n}: {name}")

# Rule: which folders each library folder may include (its declared dependencies).
MAY_INCLUDE = {
    "format/base": {"include"},
    "format": {"include", "format/base"},
    "loader/config": {"include", "format/base", "format", "loader/image", "loader/ranks"},
    "loader/protocol": {"include", "format/base", "format", "loader/config", "loader/image"},
    "loader/io": {"include", "format/base", "format", "loader/config", "loader/protocol",
                  "loader/dataset", "loader/objstore", "loader/tiers"},
    # loader/objstore/: the base only; its uploader also format/ (FILE_MAY_INCLUDE below)
    "loader/objstore": {"include", "format/base"},
    "loader/dataset": {"include", "format/base", "format", "loader/objstore"},
    "loader/cost": {"include", "format/base", "format", "loader/protocol", "loader/dataset",
                    "loader/objstore"},
    "loader/tiers": {"include", "format/base", "format"},
    "loader/ranks": {"include", "format/base", "format"},
    "loader/image": {"include", "format/base", "format"},
    "loader/runtime": set(LIBRARY) - {"packer", "rpc"} | {"include"},
    # packer/ (the library): format/ and the public header; it links the data library
    # (DATA below), which hdmlp-pack's read-back and upload commands call through hdmlp.h.
    "packer": {"include", "format/base", "format"},
    "rpc": {"include", "format/base", "format", "loader/config", "loader/ranks",
            "loader/runtime"},
}
# The uploader (in objstore/, above dataset/) also takes the index's layout and the file
# names from format/; it reaches datasets through hdmlp.h, never dataset/'s headers.
UPLOADER = "loader/objstore/loader_source_upload.c"
FILE_MAY_INCLUDE = {UPLOADER: {"format"}}
for f in files:
    fo = folder(f)
    if fo in MAY_INCLUDE:
        may = MAY_INCLUDE[fo] | FILE_MAY_INCLUDE.get(f, set())
        for n, t in edges[f]:
            if folder(t) != fo and folder(t) not in may:
                fail(f"{f if f in FILE_MAY_INCLUDE else fo + '/'} includes only "
                     f"{', '.join(sorted(may))}", f"{f}:{n}: {t}")

# Rule: only loader/runtime/ includes the runtime struct (loader_core.h).
for f in files:
    for n, t in edges[f]:
        if t == "loader/runtime/loader_core.h" and folder(f) != "loader/runtime":
            fail("only loader/runtime/ includes loader_core.h", f"{f}:{n}")

# Rule: programs and bindings use the public header only (own headers allowed); the packer's
# CLI also uses the packer library's headers. The size grammar (loader/config/loader_units.c,
# libc only, not in the library) is compiled into the CLIs and Python with its header.
UNITS_H = "loader/config/loader_units.h"
PUBLIC_ONLY = {"loader/cli": {UNITS_H}, "python": {UNITS_H}, "examples": set(),
               "packer/cli": {"packer/packer.h", "packer/pack_image.h", UNITS_H}}
for f in files:
    fo = folder(f)
    if fo in PUBLIC_ONLY:
        for n, t in edges[f]:
            if folder(t) != fo and t != "include/hdmlp.h" and t not in PUBLIC_ONLY[fo]:
                fail(f"{fo}/ uses hdmlp.h only", f"{f}:{n}: {t}")

# Rule: gRPC, protobuf-c and MPI headers only where named (rpc/; tests that attack or
# fixture the transport). rpc_internal.h passes gRPC's types on to the rpc files below it.
THIRD = {
    r"grpc/": {"rpc/rpc_internal.h", "rpc/rpc_client.c", "rpc/rpc_server.c",
               "tests/support/rpc_fixture.h", "tests/support/rpc_fixture.c",
               "tests/hostile/hostile_rpc_attacker.c"},
    r"protobuf-c/|\.pb-c\.h$": {"rpc/rpc_codec.c"},
    r"^mpi\.h$": {"rpc/rpc_bootstrap_mpi.c", "tests/rpc/rpc_mpi_boot.c"},
}
for f in files:
    for n, angle, name in inc[f]:
        for pat, allowed in THIRD.items():
            if re.search(pat, name) and f not in allowed:
                fail(f"{pat} headers only in {', '.join(sorted(allowed))}", f"{f}:{n}: {name}")

# Rule: tests include the public header, tests/support/, their own folder, and internal
# headers of the module they test: a test under tests/loader/X/ only loader/X/ (besides the
# base, format/ and the config struct, loader/config/loader.h); tests/format/ only format/;
# tests/rpc/ only rpc/ and loader/ranks/ (the peer interface). Listed exceptions below.
TEST_MODULE = {"tests/format": {"format", "format/base"}}
for sub in ("config", "protocol", "io", "objstore", "dataset", "cost", "tiers", "ranks",
            "image", "runtime"):
    TEST_MODULE["tests/loader/" + sub] = {"loader/" + sub, "format", "format/base",
                                          "loader/config"}
TEST_MODULE["tests/rpc"] = {"rpc", "loader/ranks", "loader/config", "format", "format/base"}
TEST_EXCEPTIONS = {
    # the SSD tier's and the skip-corrupt tests read samples back through the dataset
    ("tests/loader/tiers/test_tiers.c", "loader/dataset/loader_dataset.h"),
    ("tests/loader/runtime/test_reliability.c", "loader/dataset/loader_dataset.h"),
    # the SSD tier's tests turn the stager off (a test-only switch of the runtime)
    ("tests/loader/tiers/test_tiers.c", "loader/runtime/loader_testing.h"),
    # the tier sources' tests make the tiers they read
    ("tests/loader/io/test_chunksrc.c", "loader/tiers/loader_tier.h"),
}
used_exceptions = set()
for f in files:
    fo = folder(f)
    if fo in TEST_MODULE:
        for n, t in edges[f]:
            tf = folder(t)
            if (tf in TEST_MODULE[fo] or tf == fo or t.startswith("tests/support/")
                    or t == "include/hdmlp.h"):
                continue
            if (f, t) in TEST_EXCEPTIONS:
                used_exceptions.add((f, t))
                continue
            fail(f"{fo}/ includes its module, hdmlp.h and tests/support/ only",
                 f"{f}:{n}: {t}")

for f, t in sorted(TEST_EXCEPTIONS - used_exceptions):
    fail("listed test exceptions still hold (remove the stale ones)", f"{f}: {t}")

# Rule: no include circles between files, nor between the library folders.


def find_cycle(graph):
    state, stack = {}, []

    def visit(v):
        state[v] = 1
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if state.get(w) == 1:
                return stack[stack.index(w):] + [w]
            if state.get(w) is None:
                c = visit(w)
                if c:
                    return c
        stack.pop()
        state[v] = 2
        return None

    for v in sorted(graph):
        if state.get(v) is None:
            c = visit(v)
            if c:
                return c
    return None


file_graph = {f: {t for _, t in edges[f]} for f in files}
c = find_cycle(file_graph)
if c:
    fail("no include circles between files", " -> ".join(c))
folder_graph = {}
for f in files:
    if folder(f) in LIBRARY:
        folder_graph.setdefault(folder(f), set()).update(
            t for t in quoted_folders(f) if t in LIBRARY)
c = find_cycle(folder_graph)
if c:
    fail("no include circles between folders", " -> ".join(c))

# ---- the built objects ---------------------------------------------------------------------
build = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("HDMLP_BUILD", "")
explicit = bool(build)
if not build:
    build = next((d for d in ("build-ci", "build") if os.path.isdir(d)), "")
if explicit and not os.path.isdir(build):
    fail("object rules need a build", f"no build directory {build}")
    build = ""


def dep_infos(top):
    for d, _, names in os.walk(top):
        if "DependInfo.cmake" in names:
            yield os.path.join(d, "DependInfo.cmake")


objects = {}  # tracked source -> object file
if build:
    pair = re.compile(r'^\s*"([^"]+\.c)"\s+"([^"]+\.o)"')
    for info in dep_infos(build):
        with open(info) as fh:
            for line in fh:
                m = pair.match(line)
                if m and m.group(1).startswith(ROOT + "/"):
                    src = m.group(1)[len(ROOT) + 1:]
                    obj = os.path.join(build, m.group(2))
                    if src in by_name.get(os.path.basename(src), []) and os.path.exists(obj):
                        objects.setdefault(src, obj)
    if not objects and explicit:
        fail("object rules need a build", f"no objects found in {build}")
    elif not objects:
        print(f"check_layers: no objects found in {build}: object rules skipped",
              file=sys.stderr)
elif not explicit:
    print("check_layers: no build directory: object rules skipped", file=sys.stderr)


def nm(path, defined):
    args = ["nm", "-D", "--defined-only"] if defined == "dyn" else (
        ["nm", "--defined-only"] if defined else ["nm", "-u"])
    out = subprocess.run(args + [path], capture_output=True, text=True).stdout
    syms = set()
    for line in out.splitlines():
        p = line.split()
        if p:
            syms.add(p[-1].split("@")[0])
    return syms


def lib_symbols(name):
    path = subprocess.run(["cc", "-print-file-name=" + name], capture_output=True,
                          text=True).stdout.strip()
    path = os.path.realpath(path)
    if not os.path.exists(path):
        fail("object rules need the libraries", f"{name} not found")
        return set()
    return nm(path, "dyn" if ".so" in name else True)


# System calls, files, threads, sockets, memory mappings, processes, the environment.
SYSCALL = re.compile(
    r"^(open|open64|openat|openat64|creat|close|read|readv|pread|pread64|preadv|write|"
    r"writev|pwrite|pwrite64|pwritev|lseek|lseek64|fsync|fdatasync|syncfs|sync_file_range|"
    r"ftruncate|fallocate|posix_fadvise|mmap|mmap64|munmap|madvise|mprotect|mlock|stat|"
    r"stat64|fstat|fstat64|lstat|fstatat|fstatat64|statx|statfs|fstatfs|access|faccessat|"
    r"unlink|unlinkat|rename|renameat|renameat2|link|symlink|readlink|mkdir|mkdirat|rmdir|"
    r"opendir|fdopendir|readdir|readdir64|closedir|fopen|fopen64|fdopen|freopen|fclose|"
    r"fread|fwrite|fgets|fputs|fprintf|getline|getdelim|socket|socketpair|connect|bind|"
    r"listen|accept|accept4|send|sendto|sendmsg|recv|recvfrom|recvmsg|shutdown|poll|ppoll|"
    r"select|epoll_\w+|eventfd|ioctl|fcntl|pipe|pipe2|dup|dup2|fork|vfork|clone|execv\w*|"
    r"waitpid|kill|raise|signal|sigaction|pthread_\w+|thrd_\w+|mtx_\w+|cnd_\w+|"
    r"sched_yield|nanosleep|usleep|sleep|clock_nanosleep|syscall|io_uring_\w+|shm_open|"
    r"shm_unlink|memfd_create|dlopen|dlsym|dlclose|getenv|secure_getenv|sysconf|getrlimit|"
    r"setrlimit|getpid|gettid|uname|printf|puts|perror|abort|exit|_exit)$")
ALLOC = {"malloc", "calloc", "realloc", "reallocarray", "free", "aligned_alloc",
         "posix_memalign", "memalign", "valloc", "pvalloc", "strdup", "strndup"}

if objects:
    libs = {n: lib_symbols(n) for n in ("libc.so.6", "libm.so.6", "libzstd.so", "libxxhash.so",
                                        "libcurl.so", "libcrypto.so", "libarchive.so",
                                        "libturbojpeg.so", "libspng.so")}
    libs["libgcc"] = nm(subprocess.run(["cc", "-print-libgcc-file-name"], capture_output=True,
                                       text=True).stdout.strip(), True)
    ignore = {"_GLOBAL_OFFSET_TABLE_"}
    by_folder = {}
    for src, obj in objects.items():
        by_folder.setdefault(folder(src), {})[src] = obj
    defined = {fo: set().union(*(nm(o, True) for o in objs.values()))
               for fo, objs in by_folder.items()}

    def resolved_by(fo, deps, ext, rule, skip=(), only=None, also=frozenset()):
        """Every undefined symbol of fo's objects (those in `only` if given, none in `skip`)
        is defined by fo, deps, ext libraries or the symbols `also`."""
        have = set().union(defined.get(fo, set()), *(defined.get(d, set()) for d in deps),
                           *(libs[e] for e in ext), also)
        for src, obj in sorted(by_folder.get(fo, {}).items()):
            if src in skip or (only is not None and src not in only):
                continue
            for s in sorted(nm(obj, False) - have - ignore):
                fail(rule, f"{src}: {s}")

    def no_syscalls(fo, rule, allowed=()):
        for src, obj in sorted(by_folder.get(fo, {}).items()):
            for s in sorted(nm(obj, False)):
                if SYSCALL.match(s) and (src, s) not in allowed:
                    fail(rule, f"{src}: {s}")

    # the base: libc only
    resolved_by("format/base", [], ["libc.so.6", "libgcc"], "format/base/ depends on libc only")
    # format/: the base, zstd, xxhash; no files, threads, sockets
    resolved_by("format", ["format/base"], ["libc.so.6", "libgcc", "libzstd.so", "libxxhash.so"],
                "format/ depends on the base, zstd and xxhash only")
    no_syscalls("format", "format/ makes no system call (no files, threads, sockets)")
    # the object store: the base, libcurl, libcrypto; its uploader (above dataset/) also
    # format/ and the dataset functions of the public API
    resolved_by("loader/objstore", ["format/base"],
                ["libc.so.6", "libgcc", "libcurl.so", "libcrypto.so"],
                "loader/objstore/ depends on the base, libcurl and libcrypto only",
                skip={UPLOADER})
    shared = os.path.join(build, "libhdmlp.so")
    public = nm(shared, "dyn") if os.path.exists(shared) else set()
    if not public:
        fail("object rules need libhdmlp.so", f"{shared} not built")
    resolved_by("loader/objstore", ["format/base", "format"], ["libc.so.6", "libgcc"],
                f"{UPLOADER} depends on the object store, the base, format/ and the "
                "dataset's public functions only",
                only={UPLOADER}, also=defined.get("loader/dataset", set()) & public)
    # the dataset: the base, format/, the object store below it (not the uploader)
    objstore_below = set().union(*(nm(o, True) for src, o in
                                   by_folder.get("loader/objstore", {}).items()
                                   if src != UPLOADER))
    resolved_by("loader/dataset", ["format/base", "format"], ["libc.so.6", "libgcc"],
                "loader/dataset/ depends on the base, format/ and objstore/ (not its "
                "uploader) only", also=objstore_below)
    # the protocol: no system call (its folders below it: base, format, config, image)
    no_syscalls("loader/protocol", "loader/protocol/ makes no system call")
    resolved_by("loader/protocol",
                ["format/base", "format", "loader/config", "loader/image"],
                ["libc.so.6", "libm.so.6", "libgcc"],
                "loader/protocol/ depends on the base, format/, config/ and image/ only")
    # the packer library: the base and format/ (and its archive and image libraries)
    resolved_by("packer", ["format/base", "format"],
                ["libc.so.6", "libm.so.6", "libgcc", "libzstd.so", "libxxhash.so",
                 "libarchive.so", "libturbojpeg.so", "libspng.so"],
                "packer/ (the library) depends on format/ and the base only")
    # hdmlp-pack (packer/cli/): the packer library, the data library and the size grammar
    resolved_by("packer/cli", ["packer"] + DATA,
                ["libc.so.6", "libm.so.6", "libgcc", "libturbojpeg.so", "libspng.so"],
                "packer/cli/ (hdmlp-pack) calls the packer library and the data library only",
                also={"units_parse_size"})
    # programs and bindings reach the library through its exported API only
    internal = set().union(*(defined.get(fo, set()) for fo in LIBRARY)) - public
    for fo in ("loader/cli", "python", "examples", "packer/cli"):
        hidden = internal - (defined["packer"] if fo == "packer/cli" else set())
        hidden -= {"units_parse_size"}  # the size grammar: compiled into each program
        for src, obj in sorted(by_folder.get(fo, {}).items()):
            for s in sorted(nm(obj, False) & hidden):
                fail(f"{fo}/ calls the library through hdmlp.h only", f"{src}: {s}")
    # no call circles between the library's files: an edge from a file to each file that
    # defines a symbol its object uses (the layering the internal headers describe).
    lib_objs = {src: obj for fo in LIBRARY for src, obj in by_folder.get(fo, {}).items()}
    definer = {}
    for src, obj in lib_objs.items():
        for s in nm(obj, True):
            definer.setdefault(s, src)
    call_graph = {src: {definer[s] for s in nm(obj, False) if definer.get(s, src) != src}
                  for src, obj in lib_objs.items()}
    c = find_cycle(call_graph)
    if c:
        fail("no call circles between the library's files (from the objects' symbols)",
             " -> ".join(c))
    # no raw allocation in library code outside the base (programs and bindings allocate
    # with libc: they see only the public header). getline's buffer is freed with free().
    ALLOC_OK = {("packer/pack_scan_list.c", "free"), ("packer/pack_scan_manifest.c", "free")}
    for fo in LIBRARY:
        if fo == "format/base":
            continue
        for src, obj in sorted(by_folder.get(fo, {}).items()):
            for s in sorted(nm(obj, False) & ALLOC):
                if (src, s) not in ALLOC_OK:
                    fail("no raw allocation outside format/base/ (hd_malloc and friends)",
                         f"{src}: {s}")

rules = {}
for rule, detail in failures:
    rules.setdefault(rule, []).append(detail)
for rule, details in rules.items():
    print(f"check_layers: {rule}:", file=sys.stderr)
    for d in details:
        print(f"  {d}", file=sys.stderr)
sys.exit(1 if failures else 0)
