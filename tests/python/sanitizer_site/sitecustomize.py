"""Loaded by every Python process of python_tests in sanitizer builds (python/CMakeLists.txt
puts this directory on PYTHONPATH; it stands in for Debian's sitecustomize, which only
installs apport's hook, absent here).

fork() copies a process with its locks as its other threads leave them at that instant; a
lock held by another thread stays locked in the child for good. glibc's malloc and most of
CPython take theirs over fork; GCC 12's ASan runtime does not (LLVM 18 added that), and
under ASan threads take longer to allocate and to exit. DataLoader workers forked while
another thread was allocating or exiting hung in their first malloc/free, or in
PyOS_AfterFork_Child. So before a fork, wait (up to a second) until every other thread of
the process sleeps.
"""
import os
import threading
import time


def _others_asleep(me):
    for tid in os.listdir("/proc/self/task"):
        if int(tid) == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:  # exited meanwhile
            continue
        if state not in ("S", "Z", "X", "t", "T", "I"):
            return False
    return True


def _settle_before_fork():
    me = threading.get_native_id()
    deadline = time.monotonic() + 1.0
    quiet = 0
    while quiet < 2 and time.monotonic() < deadline:
        quiet = quiet + 1 if _others_asleep(me) else 0
        time.sleep(0.001)


os.register_at_fork(before=_settle_before_fork)
