"""hdmlp.pack(): make a dataset from Python with the hdmlp-pack tool of this package.

    hdmlp.pack("photos/", "train.hdmlp", chunk_size=64, seed=1)
    hdmlp.pack(["a.tar", "b.tar"], "train.hdmlp", compress="zstd:9", force=True)

pack() runs hdmlp-pack (the one installed with the package, see tool_path) with the
keyword arguments mapped one to one onto its options: chunk_size=64 is --chunk-size 64,
dict=True is --dict, a False or None value leaves the option out. Options not named in
the signature pass through the same way (any_option=VALUE is --any-option VALUE, True a
bare --any-option), so every option of `hdmlp-pack --help` is available. The tool checks
the values: a failure raises hdmlp.Error (a subclass where the message says which) whose
message is the tool's own. A progress bar is drawn on stderr when it is a terminal.

Where the tools are (tool_path): the package's own bin/ (pip built and bundled them), or
the paths recorded when the package was built against an installed or built libhdmlp
(HDMLP_PREFIX, HDMLP_BUILD_DIR, pkg-config, CMake); then $HDMLP_PACK / $HDMLP_BENCH, then
PATH. The console scripts hdmlp-pack and hdmlp-bench, and `python -m hdmlp pack|bench`,
run the same executables (run_tool).
"""
import errno
import os
import selectors
import shutil
import signal
import subprocess
import sys

from . import _hdmlp

__all__ = ["pack", "tool_path", "run_tool"]

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_ENV = {"hdmlp-pack": "HDMLP_PACK", "hdmlp-bench": "HDMLP_BENCH"}
_PREFIX = b"hdmlp-pack: "
_WARNING = b"hdmlp-pack: warning: "
_HELP_HINT = b"Try 'hdmlp-pack --help'"
_CLEAR = b"\x1b[K"
# Options whose value is a number or a string: a bool there is a mistake, not a flag.
_VALUED = {"chunk_size", "seed", "compress", "image_max_side", "image_quality", "threads",
           "segment_size", "output"}


def _recorded():
    """{tool name: path} written into the package when it was built (python/setup.py,
    python/CMakeLists.txt); relative paths are relative to the package directory."""
    try:
        from ._toolpaths import TOOLS
    except ImportError:
        return {}
    return dict(TOOLS)


def _is_binary(path):
    """An executable file that is not a script: never this package's console script of
    the same name found on PATH (which would run itself)."""
    try:
        with open(path, "rb") as f:
            head = f.read(2)
    except OSError:
        return False
    return head != b"#!" and os.access(path, os.X_OK)


def tool_path(name):
    """Absolute path of the executable hdmlp-pack or hdmlp-bench this package uses.

    Raises hdmlp.NotFoundError (a FileNotFoundError) naming where it looked."""
    if name not in _ENV:
        raise _hdmlp.InvalidArgumentError(f"tool: expected one of {sorted(_ENV)}, got {name!r}")
    tried = []
    rec = _recorded().get(name)
    candidates = []
    if rec:
        candidates.append(os.path.normpath(os.path.join(_PKG_DIR, rec)))
    env = os.environ.get(_ENV[name])
    if env:
        candidates.append(env)
    found = shutil.which(name)
    if found:
        candidates.append(found)
    for c in candidates:
        if _is_binary(c):
            return os.path.abspath(c)
        tried.append(c)
    where = f" (tried {', '.join(tried)})" if tried else ""
    msg = (f"{name} not found{where}: this hdmlp package carries none (pip bundles it when "
           f"it builds libhdmlp itself; a package built against an installed libhdmlp uses "
           f"that prefix's bin/). Set {_ENV[name]}=/path/to/{name} or put it on PATH")
    exc = _hdmlp.NotFoundError(errno.ENOENT, msg)
    _set_attrs(exc, getattr(_hdmlp, "E_NOTFOUND", None), msg)
    raise exc


def run_tool(name, argv):
    """Replaces this process with the tool (console scripts, python -m hdmlp)."""
    try:
        path = tool_path(name)
    except _hdmlp.Error as e:
        sys.stderr.write(f"{name}: {e.strerror if isinstance(e, OSError) else e}\n")
        return 127
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(path, [name] + list(argv))
    return 127  # not reached


def _set_attrs(exc, code, detail):
    exc.code = code
    exc.name = _hdmlp.err_name(code) if code is not None else None
    exc.detail = detail


def _option_args(options):
    args = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            if key in _VALUED:
                raise _error_inval(f"{key}: expected a value, got True")
            args.append(flag)
            continue
        if isinstance(value, (bytes, os.PathLike)):
            value = os.fsdecode(value)
        elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            value = ",".join(value)  # --file-fields a,b and the like
        elif not isinstance(value, (str, int, float)):
            raise _error_inval(f"{key}: expected a string or a number, got "
                               f"{type(value).__name__}")
        args += [flag, str(value)]
    return args


def _error_inval(msg):
    exc = _hdmlp.InvalidArgumentError(msg)
    _set_attrs(exc, _hdmlp.E_INVAL, msg)
    return exc


def _paths(value, what):
    if value is None:
        return []
    if isinstance(value, (str, bytes, os.PathLike)):
        value = [value]
    try:
        return [os.fsdecode(v) for v in value]
    except TypeError:
        raise _error_inval(f"{what}: expected a path or a list of paths, got "
                           f"{type(value).__name__}") from None


class _Relay:
    """Copies the tool's stderr to sys.stderr as it comes (progress bar, warnings) and
    keeps back its own messages ("hdmlp-pack: ...", the --help hint): on failure they are
    the exception's message, on success they are written out at the end."""

    def __init__(self, out):
        self.out = out
        self.pending = b""
        self.held = []

    def _write(self, data):
        if data and self.out is not None:
            self.out.write(data.decode("utf-8", "replace"))
            self.out.flush()

    def _line(self, line):
        head, sep, text = line.rpartition(b"\r")
        prefix = head + sep
        if text.startswith(_CLEAR):
            prefix, text = prefix + _CLEAR, text[len(_CLEAR):]
        if (text.startswith(_PREFIX) and not text.startswith(_WARNING)) or \
                text.startswith(_HELP_HINT):
            self._write(prefix)
            self.held.append(text)
        else:
            self._write(line + b"\n")

    def feed(self, data):
        self.pending += data
        *lines, self.pending = self.pending.split(b"\n")
        for line in lines:
            self._line(line.rstrip(b"\r") if line.endswith(b"\r") else line)
        if self.pending.endswith(_CLEAR):  # a whole redraw of the progress bar
            self._write(self.pending)
            self.pending = b""

    def close(self):
        if self.pending:
            self._line(self.pending)
            self.pending = b""

    def messages(self):
        return [m.decode("utf-8", "replace") for m in self.held if not m.startswith(_HELP_HINT)]


def _want_tty(progress, quiet):
    if quiet or progress is False:
        return False
    if progress:
        return True
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _open_pty():
    """(master, slave) with output post-processing off (no \\n -> \\r\\n), or None."""
    try:
        import pty
        import termios
        master, slave = pty.openpty()
    except (ImportError, OSError):
        return None
    try:
        attrs = termios.tcgetattr(slave)
        attrs[1] &= ~termios.OPOST
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
    except (OSError, termios.error):
        pass
    return master, slave


def _run(argv, tty):
    """Runs the tool; returns (exit status, its messages)."""
    pair = _open_pty() if tty else None
    err_fd = pair[1] if pair else subprocess.PIPE
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err_fd)
    except BaseException:
        if pair:
            os.close(pair[0])
            os.close(pair[1])
        raise
    if pair:
        os.close(pair[1])
        err_read = pair[0]
    else:
        err_read = proc.stderr.fileno()
    relay = _Relay(sys.stderr)
    out = sys.stdout
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout.fileno(), selectors.EVENT_READ, "out")
    sel.register(err_read, selectors.EVENT_READ, "err")
    try:
        while sel.get_map():
            for key, _ in sel.select():
                try:
                    data = os.read(key.fd, 65536)
                except OSError:  # EIO: the pty's other side is closed
                    data = b""
                if not data:
                    sel.unregister(key.fd)
                elif key.data == "err":
                    relay.feed(data)
                elif out is not None:
                    out.write(data.decode("utf-8", "replace"))
                    out.flush()
        status = proc.wait()
    except BaseException:
        _stop(proc)
        raise
    finally:
        sel.close()
        proc.stdout.close()
        if pair:
            os.close(pair[0])
        elif proc.stderr is not None:
            proc.stderr.close()
    relay.close()
    return status, relay.messages()


def _stop(proc):
    """Interrupted (Ctrl-C reaches the tool too, in the same process group): let it remove
    its temporary output, as it does on SIGINT; kill it if it does not end."""
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    except BaseException:
        proc.kill()
        proc.wait()


def _failure(status, messages):
    if status < 0:
        detail = f"hdmlp-pack ended by signal {-status}"
        messages = messages or [detail]
    elif not messages:
        messages = [f"hdmlp-pack exited with status {status}"]
    text = "\n".join(messages)
    detail = "\n".join(m[len(_PREFIX):] if m.encode().startswith(_PREFIX) else m
                       for m in messages)
    low = detail.lower()
    if status == 2:
        cls, code, err = _hdmlp.InvalidArgumentError, _hdmlp.E_INVAL, 0
    elif "no such file or directory" in low or "not found" in low:
        cls, code, err = _hdmlp.NotFoundError, _hdmlp.E_NOTFOUND, errno.ENOENT
    elif "already exists" in low:
        cls, code, err = _hdmlp.ExistsError, _hdmlp.E_EXISTS, errno.EEXIST
    elif "interrupted" in low or status == -signal.SIGINT:
        cls, code, err = _hdmlp.Interrupted, _hdmlp.E_INTERRUPTED, errno.EINTR
    else:
        cls, code, err = _hdmlp.Error, None, 0
    exc = cls(err, text) if err else cls(text)
    _set_attrs(exc, code, detail)
    exc.exit_status = status
    return exc


def pack(inputs, out, *, lists=None, manifests=None, chunk_size=None, seed=None, compress=None, dict=False,
         image_max_side=None, image_quality=None, threads=None, segment_size=None,
         force=False, quiet=False, progress=None, **options):
    """Packs inputs into the dataset directory out with hdmlp-pack; returns out (a str).

    inputs: a path or a list of paths (directories of class folders, archives); lists: a
    path or a list of paths of list files (--list: lines "PATH<TAB>LABEL"); manifests: a path
    or a list of paths of JSONL or CSV manifests (--manifest: a sample a row, a field a
    column; inputs is then None; label_field, file_fields (a list or "a,b") and
    require_fields name columns as hdmlp-pack --help says). The options
    are hdmlp-pack's (see `hdmlp-pack --help`): chunk_size (--chunk-size K or "auto", the default),
    seed (--seed; default random, printed in the summary and stored), compress ('none',
    'auto', 'zstd', 'zstd:LEVEL'), dict (--dict), image_max_side, image_quality, threads
    (-j), segment_size (bytes or '512M'), force (-f: replace an existing out), quiet (-q:
    no summary, no progress bar); any other keyword passes through as its option
    (skip_nested=True is --skip-nested). The summary goes to sys.stdout, warnings to
    sys.stderr; progress: draw the tool's progress bar (default: when sys.stderr is a
    terminal). out may be s3://BUCKET/PREFIX (packs, then uploads).

    Raises an hdmlp.Error carrying the tool's message: InvalidArgumentError (a ValueError)
    for what the tool refuses as a usage error (exit 2), NotFoundError / ExistsError
    (OSError) for a missing input or an existing out without force, Interrupted when
    stopped, hdmlp.Error otherwise; `exit_status` is the tool's exit status. Ctrl-C stops
    the tool (it removes its temporary files) and raises KeyboardInterrupt.
    """
    out = os.fspath(out)
    if isinstance(out, bytes):
        out = os.fsdecode(out)
    named = {"chunk_size": chunk_size, "seed": seed, "compress": compress, "dict": dict,
             "image_max_side": image_max_side, "image_quality": image_quality,
             "threads": threads, "segment_size": segment_size, "force": force,
             "quiet": quiet}
    named.update(options)
    argv = [tool_path("hdmlp-pack")] + _option_args(named) + ["-o", out]
    for path in _paths(lists, "lists"):
        argv += ["--list", path]
    for path in _paths(manifests, "manifests"):
        argv += ["--manifest", path]
    argv += ["--"] + _paths(inputs, "inputs")
    status, messages = _run(argv, _want_tty(progress, quiet))
    if status != 0:
        raise _failure(status, messages)
    for m in messages:  # notes the tool printed on success
        sys.stderr.write(m + "\n")
    return out
