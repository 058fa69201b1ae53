#!/usr/bin/env python3
"""Writes a tar stream of N tiny samples to stdout, for scale_bench.sh (issue 27).

    scale_gen.py N [--size 64] [--classes 100] [--seed 1] | zstd -1 -q -o data.tar.zst

Member i is `class_XX/NNNNNNNN.bin` (XX = i % classes, NNNNNNNN = i, zero padded to at
least 8 digits) holding `size` bytes: i as 8 little-endian bytes, then bytes taken from a
seeded random pool at an offset that depends on i (random-looking, incompressible within
a member; a stream compressor finds some repetition across members). Nothing is written
to disk: the stream is built in memory a block of members at a time. ustar headers
(members up to 8 GiB, names up to 100 bytes), mode 0644, uid/gid 0, mtime fixed, so the
same arguments give the same bytes. Standard library only.
"""
import argparse
import random
import struct
import sys

BLOCK = 512
MTIME = 1_767_225_600  # 2026-01-01T00:00:00Z: the stream does not depend on the clock


def header_template(size):
    """A ustar header with an empty name and the checksum field as spaces."""
    h = bytearray(BLOCK)
    h[100:108] = b"0000644\0"
    h[108:116] = b"0000000\0"
    h[116:124] = b"0000000\0"
    h[124:136] = b"%011o\0" % size
    h[136:148] = b"%011o\0" % MTIME
    h[148:156] = b" " * 8
    h[156:157] = b"0"
    h[257:263] = b"ustar\0"
    h[263:265] = b"00"
    return h


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("count", type=int, help="members (samples)")
    ap.add_argument("--size", type=int, default=64, help="bytes per member, >= 8 (default 64)")
    ap.add_argument("--classes", type=int, default=100, help="class directories (default 100)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the byte pool (default 1)")
    a = ap.parse_args()
    if a.count < 1 or a.size < 8 or not 1 <= a.classes <= 100:
        ap.error("need count >= 1, size >= 8, 1 <= classes <= 100")

    digits = max(8, len(str(a.count - 1)))
    name_fmt = ("class_%%02d/%%0%dd.bin" % digits).encode()
    tmpl = header_template(a.size)
    base_sum = sum(tmpl)
    pad = bytes(-a.size % BLOCK)
    tail = a.size - 8
    pool_len = 1 << 16
    pool = random.Random(a.seed).randbytes(pool_len + tail)
    pack_u64 = struct.Struct("<Q").pack

    out = sys.stdout.buffer
    step = 4096
    for start in range(0, a.count, step):
        parts = []
        for i in range(start, min(start + step, a.count)):
            name = name_fmt % (i % a.classes, i)
            h = tmpl[:]
            h[0:len(name)] = name
            h[148:156] = b"%06o\0 " % (base_sum + sum(name))
            off = (i * 2654435761) % pool_len
            parts.append(h)
            parts.append(pack_u64(i))
            parts.append(pool[off:off + tail])
            parts.append(pad)
        out.write(b"".join(parts))
    out.write(bytes(2 * BLOCK))  # end of archive
    out.flush()


if __name__ == "__main__":
    main()
