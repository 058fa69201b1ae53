"""The node data plane of hdmlp.torch: one loader per rank, shared by its DataLoader workers.

With DataLoader(num_workers=W), the first worker to iterate starts a plane process
(`python -m hdmlp._plane`) for its rank. The plane runs the rank's only hdmlp.Loader
(with the rank's memory budget, as without workers, so the order is the same) and copies each batch into a record
of a shared-memory arena (a memfd; py_ring.c). Batch i of an epoch goes to worker i mod W,
which is the order DataLoader takes batches from its workers in, so the DataLoader yields
exactly the sequence of a single loader: each sample is read and decompressed once per
node per epoch, whatever W, and the order does not depend on W. Workers see their
records as zero-copy hdmlp.Batch objects; releasing one frees its record. A raw-byte
batch is not taken by its worker: the worker hands its place on, and the training process
maps the arena (main_arena), claims the record, copies it out and releases it; the plane
frees a record whose worker left only while nobody has claimed it.

Control runs over a Unix SOCK_SEQPACKET socket in the abstract namespace (nothing left on
disk; peers must have this process's uid), one JSON message per packet; the arena's fd is
passed once at connect (SCM_RIGHTS). Sessions: each worker's iter() asks to join the
session of its DataLoader iteration (named by a key all its workers share); a new key
opens the next session, and the loader leaves the old epoch as hdmlp.Loader does when an
iteration is abandoned.
The plane keeps the loader's state after every batch of the current session, so the main
process can save the position the DataLoader has yielded (not what workers prefetched).

The plane exits when the main process does (a pidfd; within about a second, even when the
main process was killed), when the dataset object in the main process is finalized
(shutdown message), or on a fatal error; a worker's death ends the session with an error
naming it, and the plane's death makes the workers raise. DataLoader workers watch the main
process themselves (hdmlp.torch).
"""
import base64
import errno
import json
import mmap
import os
import select
import socket
import struct
import subprocess
import sys
import threading
import time

import hdmlp
from hdmlp import _hdmlp

MAX_MSG = 1 << 16
CONNECT_TIMEOUT = float(os.environ.get("HDMLP_PLANE_START_TIMEOUT", "120"))


def address(name):
    return "\0" + name


def _send(sock, msg, fds=()):
    data = json.dumps(msg).encode()
    if fds:
        socket.send_fds(sock, [data], list(fds))
    else:
        sock.send(data)


def _encode_state(state):
    if state is None:
        return None
    out = dict(state)
    out["state"] = base64.b64encode(out["state"]).decode()
    return out


def _decode_state(state):
    if state is None:
        return None
    out = dict(state)
    out["state"] = base64.b64decode(out["state"])
    return out


def _peer_uid(sock):
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


# -- the plane process ------------------------------------------------------------------

class _Session:
    def __init__(self, sid, key, workers, epoch):
        self.sid = sid
        self.key = key              # the DataLoader iteration (see Client.iterate)
        self.workers = workers
        self.epoch = epoch          # requested epoch, or None (the loader's next)
        self.joined = {}            # worker id -> (conn, key)
        self.outbox = {w: [] for w in range(workers)}  # messages for workers not joined yet
        self.states = []            # loader state after j batches (j = 0..)
        self.ended = False


class Plane:
    def __init__(self, spec):
        self.spec = spec
        self.lock = threading.Condition()
        self.session = None
        self.next_sid = 1
        self.records = []           # [offset, length, holder] in production order, not yet
                                    # reused; holder: the worker socket it went to, or None
        self.head = 0               # next free offset
        self.seq = 0
        self.closing = False
        self.conns = {}             # fd -> socket
        self.fatal = None
        self.seen = set()           # keys of the sessions so far

    # arena space: records are placed in production order and reused oldest first
    def _reclaim(self):
        with self.lock:
            while self.records and _hdmlp._ring_released(self.mm, self.records[0][0]):
                self.records.pop(0)

    def _free(self, rec):
        """A record nobody will take (its worker left, its session was replaced)."""
        _hdmlp._ring_free(self.mm, rec[0])

    def _alloc(self, size):
        """Offset of `size` free bytes, waiting for workers to release records."""
        cap = len(self.mm)
        if size > cap:
            raise hdmlp.OutOfMemoryError(
                f"data plane: a batch of {size} bytes does not fit the {cap}-byte arena; "
                "give the dataset more memory or use smaller batches")
        while True:
            self._reclaim()
            if not self.records:
                return 0
            tail = self.records[0][0]
            head = self.head
            if head > tail:  # free: [head, cap) and [0, tail); head == tail: full
                if cap - head >= size:
                    return head
                if tail >= size:
                    return 0
            elif tail - head >= size:
                return head
            with self.lock:
                if self.closing or self._stale():
                    return None
                self.lock.wait(0.002)

    def _stale(self):
        s = self.producing
        return s is not self.session or s.ended

    def _deliver(self, s, w, msg, rec=None):
        conn = s.joined.get(w)
        if conn is None:
            s.outbox[w].append((msg, rec))
            return
        if rec is not None:
            rec[2] = conn[0]
        try:
            _send(conn[0], msg)
        except OSError:
            pass  # its disconnect is handled by the control loop (and frees the record)

    def _broadcast(self, s, msg):
        for w in range(s.workers):
            self._deliver(s, w, msg)

    def produce(self):
        """Producer thread: serves the current session's epoch into the arena."""
        while True:
            with self.lock:
                while not self.closing and (self.session is None or self.session.ended or
                                            self.session is self.producing):
                    self.lock.wait()
                if self.closing:
                    return
                s = self.producing = self.session
            try:
                if self.fatal is not None:
                    raise self.fatal
                if s.epoch is not None:
                    self.ld.set_epoch(s.epoch)
                it = iter(self.ld)
                with self.lock:
                    s.states.append(self.ld.state_dict())
                i = 0
                for batch in it:
                    size = _hdmlp._ring_record_size(batch)
                    off = self._alloc(size)
                    if off is None:
                        break
                    self.seq += 1
                    _hdmlp._ring_put(self.mm, off, batch, self.seq)
                    batch.release()
                    with self.lock:
                        if self._stale():  # the space stays free: nobody got the record
                            break
                        rec = [off, size, None]
                        self.records.append(rec)
                        self.head = off + size
                        s.states.append(self.ld.state_dict())
                        self._deliver(s, i % s.workers,
                                      {"op": "batch", "session": s.sid, "i": i, "offset": off,
                                       "seq": self.seq}, rec)
                    i += 1
                else:
                    with self.lock:
                        self._broadcast(s, {"op": "end", "session": s.sid})
                        s.ended = True
            except Exception as exc:  # noqa: BLE001 - every error goes to the workers
                if isinstance(exc, (hdmlp.StorageError, hdmlp.CorruptDataError,
                                    hdmlp.PeerError, hdmlp.OutOfMemoryError)):
                    self.fatal = exc
                with self.lock:
                    self._broadcast(s, {"op": "error", "session": s.sid,
                                        "type": type(exc).__name__, "message": str(exc)})
                    s.ended = True

    def _open_session(self, key, workers, epoch):
        s = _Session(self.next_sid, key, workers, epoch)
        self.seen.add(key)
        self.next_sid += 1
        old = self.session
        if old is not None:
            if not old.ended:
                old.ended = True
                self._broadcast(old, {"op": "end", "session": old.sid})
            for box in old.outbox.values():  # records of workers that never joined it
                for _, rec in box:
                    if rec is not None:
                        self._free(rec)
        self.session = s
        self.lock.notify_all()
        return s

    def _join(self, conn, msg):
        w, workers, epoch = msg["worker"], msg["workers"], msg["epoch"]
        opened = False
        key, pid = tuple(msg["key"]), msg["pid"]
        if workers > self.spec["workers"]:
            _send(conn, {"op": "error", "type": "OutOfMemoryError",
                         "message": f"data plane: its arena was sized for "
                                    f"{self.spec['workers']} DataLoader workers, not {workers}; "
                                    "use a new dataset object for more workers"})
            return
        with self.lock:
            s = self.session
            # The workers of one DataLoader iteration share its key and join one session,
            # even one that has ended (the joiner's outbox then holds the end or the
            # error); a new key opens the next session; an old key (a worker of an
            # iteration already replaced, late) gets an empty one. Keys without the
            # hdmlp.torch.DataLoader token (key[0] None) can repeat (a generator reseeded
            # alike): those always open a session.
            if s is None or s.key != key:
                if key in self.seen and key[0] is not None:
                    _send(conn, {"op": "joined", "session": 0})
                    _send(conn, {"op": "end", "session": 0})
                    return
                s = self._open_session(key, workers, epoch)
                opened = True
            s.joined[w] = (conn, pid)
            joined = {"op": "joined", "session": s.sid}
            if opened and epoch is not None:  # the worker marks set_epoch's request taken
                joined["took"] = msg.get("request")
            _send(conn, joined)
            for m, rec in s.outbox.pop(w, []):
                if rec is not None:
                    rec[2] = conn
                _send(conn, m)

    def _state(self, conn, msg):
        j = msg["yielded"]
        with self.lock:
            s = self.session
            if s is None:
                _send(conn, {"op": "state", "state": None})
            elif j >= len(s.states):
                _send(conn, {"op": "error", "type": "StateError",
                             "message": f"state_dict: {j} batches yielded but the plane has "
                                        f"made {len(s.states) - 1} in this epoch"})
            else:
                _send(conn, {"op": "state", "state": _encode_state(s.states[j])})

    def _disconnect(self, conn):
        with self.lock:
            for rec in self.records:  # what it was sent and did not release
                if rec[2] is conn:
                    self._free(rec)
            s = self.session
            if s is not None and not s.ended:
                for w, (c, key) in list(s.joined.items()):  # key: the worker's pid
                    if c is conn:
                        s.ended = True
                        self._broadcast(s, {"op": "error", "session": s.sid,
                                            "type": "Error",
                                            "message": f"DataLoader worker {w} (pid "
                                                       f"{key}) disconnected mid-epoch"})
            self.lock.notify_all()

    def serve(self):
        spec = self.spec
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(address(spec["name"]))
        arena_fd = os.memfd_create("hdmlp-plane-arena", os.MFD_CLOEXEC)
        os.ftruncate(arena_fd, spec["arena"])
        self.mm = mmap.mmap(arena_fd, spec["arena"])
        self.ld = None
        self.producing = None
        try:
            kwargs = dict(spec["loader_kwargs"])
            for key in ("storage_cost", "tls"):  # tuples, which JSON made lists
                if isinstance(kwargs.get(key), list):
                    kwargs[key] = tuple(kwargs[key])
            if isinstance(kwargs.get("image"), dict):  # hdmlp.torch sends its attributes
                kwargs["image"] = hdmlp.ImagePipeline(**kwargs["image"])
            state = _decode_state(spec.get("state"))
            if state is not None:
                kwargs["state"] = state
            self.ld = hdmlp.Loader(spec["path"], spec["batch_size"], spec["memory"],
                                   seed=spec["seed"],
                                   rank=spec["rank"], world=spec["world"],
                                   drop_last=spec["drop_last"], **kwargs)
        except Exception as exc:  # noqa: BLE001 - reported to every worker that connects
            self.fatal = exc
        listener.listen(64)
        producer = threading.Thread(target=self.produce, daemon=True)
        producer.start()
        orphaned = False
        try:
            watch = os.pidfd_open(spec["main_pid"]) if spec.get("main_pid") else None
        except ProcessLookupError:  # the main process died before the plane started
            orphaned = True
            watch = None
        poller = select.poll()
        poller.register(listener, select.POLLIN)
        if watch is not None:
            poller.register(watch, select.POLLIN)
        try:
            while not orphaned:
                for fd, _ in poller.poll():
                    if fd == watch:
                        orphaned = True
                        return
                    if fd == listener.fileno():
                        conn, _ = listener.accept()
                        if _peer_uid(conn) != os.getuid():
                            conn.close()
                            continue
                        hello = {"op": "hello", "pid": os.getpid(), "arena": spec["arena"]}
                        if self.fatal is not None:
                            hello["error"] = {"type": type(self.fatal).__name__,
                                              "message": str(self.fatal)}
                        _send(conn, hello, [arena_fd])
                        self.conns[conn.fileno()] = conn
                        poller.register(conn, select.POLLIN)
                        continue
                    conn = self.conns[fd]
                    try:
                        data = conn.recv(MAX_MSG)
                    except OSError:
                        data = b""
                    if not data:
                        poller.unregister(fd)
                        del self.conns[fd]
                        self._disconnect(conn)
                        conn.close()
                        continue
                    msg = json.loads(data)
                    op = msg.get("op")
                    if op == "iter":
                        self._join(conn, msg)
                    elif op == "state":
                        self._state(conn, msg)
                    elif op == "stats":
                        with self.lock:
                            st = self.ld.stats() if self.ld is not None else None
                        if st is not None:
                            st["plane_arena_bytes"] = spec["arena"]
                            st["plane_pid"] = os.getpid()
                        _send(conn, {"op": "stats", "stats": st})
                    elif op == "shutdown":
                        return
        finally:
            with self.lock:
                self.closing = True
                self.lock.notify_all()
            # Orphaned: nobody will take another batch, so the plane does not wait long
            # for a producer blocked in the loader; exiting frees everything.
            producer.join(timeout=1 if orphaned else 10)
            if orphaned and producer.is_alive():
                os._exit(0)
            if self.ld is not None:
                self.ld.close()


def main():
    spec = json.loads(sys.stdin.readline())
    Plane(spec).serve()


# -- clients: DataLoader workers and the main process -----------------------------------

class PlaneError(hdmlp.Error):
    """The data plane process failed or went away."""


def _raise_remote(msg):
    cls = getattr(hdmlp, msg.get("type", "Error"), None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = hdmlp.Error
    raise cls(msg.get("message", "data plane error"))


def _connect(name):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(address(name))
    except OSError:
        s.close()
        raise
    return s


def request(name, msg):
    """One request/answer with a running plane (main process: state, stats, shutdown).
    None when no plane runs under that name."""
    try:
        s = _connect(name)
    except OSError:
        return None
    with s:
        data, fds, _, _ = socket.recv_fds(s, MAX_MSG, 1)
        for fd in fds:
            os.close(fd)
        _send(s, msg)
        if msg["op"] == "shutdown":
            return {}
        data = s.recv(MAX_MSG)
        if not data:
            raise PlaneError(f"data plane {name}: closed the connection")
        answer = json.loads(data)
        if answer.get("op") == "error":
            _raise_remote(answer)
        return answer


_arenas = {}  # (plane name, pid) -> the arena mapped in this process (main_arena)
_arenas_lock = threading.Lock()


def main_arena(name):
    """The arena of the running plane `name`, mapped once per process: where the training
    process copies the batches its workers hand over by place."""
    key = (name, os.getpid())
    with _arenas_lock:
        mm = _arenas.get(key)
        if mm is None:
            try:
                s = _connect(name)
            except OSError as exc:
                raise PlaneError(f"data plane {name}: not running ({exc})") from None
            with s:
                data, fds, _, _ = socket.recv_fds(s, MAX_MSG, 1)
                if not fds:
                    raise PlaneError(f"data plane {name}: no arena received")
                try:
                    mm = mmap.mmap(fds[0], json.loads(data)["arena"])
                finally:
                    os.close(fds[0])
            _arenas[key] = mm
        return mm


def forget_arena(name):
    """Unmaps plane `name`'s arena from this process (its dataset is gone)."""
    with _arenas_lock:
        mm = _arenas.pop((name, os.getpid()), None)
    if mm is not None:
        try:
            mm.close()
        except BufferError:  # a batch being copied out still views it: unmapped with it
            pass


class Client:
    """A worker's connection to its rank's plane (started on first use)."""

    def __init__(self, name, spec):
        self.sock = self._connect_or_start(name, spec)
        data, fds, _, _ = socket.recv_fds(self.sock, MAX_MSG, 1)
        hello = json.loads(data)
        if not fds:
            raise PlaneError("data plane: no arena received")
        self.plane_pid = hello["pid"]
        self.mm = mmap.mmap(fds[0], hello["arena"])
        os.close(fds[0])
        self.iterations = 0
        if "error" in hello:
            _raise_remote(hello["error"])

    @staticmethod
    def _connect_or_start(name, spec):
        deadline = time.monotonic() + CONNECT_TIMEOUT
        proc = None
        lock = None
        while True:
            try:
                return _connect(name)
            except OSError as exc:
                if exc.errno not in (errno.ECONNREFUSED, errno.ENOENT):
                    raise
            if proc is None and lock is None:
                lock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                try:
                    lock.bind(address(name + ".start"))
                except OSError:
                    lock.close()
                    lock = False  # another worker starts it
                else:
                    proc = subprocess.Popen([sys.executable, "-m", "hdmlp._plane"],
                                            stdin=subprocess.PIPE, start_new_session=True,
                                            text=True)
                    proc.stdin.write(json.dumps(spec) + "\n")
                    proc.stdin.close()
            if proc is not None and proc.poll() is not None:
                raise PlaneError(f"data plane for {spec['path']} exited with status "
                                 f"{proc.returncode} before serving (its error is above)")
            if time.monotonic() > deadline:
                raise PlaneError(f"data plane for {spec['path']}: not serving after "
                                 f"{CONNECT_TIMEOUT:.0f} s")
            time.sleep(0.005)

    def _recv(self):
        try:
            data = self.sock.recv(MAX_MSG)
        except OSError as exc:
            data = b""
            err = exc
        else:
            err = None
        if not data:
            raise PlaneError(f"data plane (pid {self.plane_pid}) went away"
                             + (f": {err}" if err else "") + "; its error, if any, is above")
        return json.loads(data)

    def _discard(self, msg):
        if msg.get("op") == "batch":
            _hdmlp._ring_take(self.mm, msg["offset"], msg["seq"]).release()

    def iterate(self, worker, workers, request, took, token, base_seed, take=True):
        """Batches (hdmlp.Batch over the arena) of worker `worker`'s share of one epoch;
        with take=False their records' places (offset, seq) instead, for the process the
        worker hands them to (main_arena, _hdmlp._ring_claim).
        request: set_epoch's pending (number, epoch), or None for the loader's next epoch;
        the join that opens the iteration's session applies it, and took(number) is called
        in that worker only (the caller marks the request taken).
        token (hdmlp.torch.DataLoader's, new for every iterator it makes; or None) and
        base_seed (the DataLoader iterator's worker base seed, the same in all its
        workers), with the count of iterations in this process (persistent workers count
        up together), name the DataLoader iteration."""
        self.iterations += 1
        _send(self.sock, {"op": "iter", "worker": worker, "workers": workers,
                          "epoch": None if request is None else request[1],
                          "request": None if request is None else request[0],
                          "key": [token, base_seed, self.iterations], "pid": os.getpid()})
        while True:
            msg = self._recv()
            if msg.get("op") == "joined":
                sid = msg["session"]
                if msg.get("took") is not None:
                    took(msg["took"])
                break
            self._discard(msg)
        while True:
            msg = self._recv()
            if msg.get("session") != sid:
                self._discard(msg)
                continue
            op = msg["op"]
            if op == "batch":
                yield (_hdmlp._ring_take(self.mm, msg["offset"], msg["seq"]) if take else
                       (msg["offset"], msg["seq"]))
            elif op == "end":
                return
            elif op == "error":
                _raise_remote(msg)


if __name__ == "__main__":
    main()
