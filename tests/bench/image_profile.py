#!/usr/bin/python3
"""Where the image pipeline's CPU time goes, by stage: samples the whole process (every
thread) with `perf record -e cpu-clock` (a software clock: it works where hardware counters
do not) while it runs a command, then sorts the self time of each symbol into the stages
between the encoded bytes and the batch.

    image_profile.py [--out perf.data] [--delay S] -- COMMAND...  # record and report
    image_profile.py --report perf.data                   # report a recording

e.g. image_profile.py -- /usr/bin/python3 tests/bench/image_bench.py hdmlp PACK --count 3000

--delay: start sampling S seconds after the command starts (skips Python's and torch's
start-up, which is not the pipeline). libjpeg-turbo as Debian ships it has no symbols for its
internal functions: its samples without one count as "libjpeg-turbo (unsplit)"; jpeg_floor
prints the entropy decoder's share of a full decode for the same files.
Prints a table (share of all samples per stage, and the largest symbols of each) and one
JSON line {stage: share}. Stages: entropy decode, IDCT, upsampling, colour conversion,
skipped rows (libjpeg's skip and discard), other libjpeg (headers, set-up, memory pools),
resize, layout/flip (image_store), copies (memcpy/memmove), allocation (malloc/free and
the kernel's page faults), queueing (locks, condition variables, futexes, scheduling),
the rest of the kernel, Python/torch (the consumer), other.
"""
import argparse
import json
import os
import re
import subprocess
import sys

STAGES = [
    ("entropy", r"decode_mcu|jpeg_fill_bit_buffer|jpeg_huff_decode|huff|process_restart|"
                r"consume_data|decompress_onepass|decompress_data|decompress_smooth|"
                r"jsimd_.*huff|arith_decode|decode_mcu_"),
    ("idct", r"idct"),
    ("upsample", r"upsample|upsampl|merged_.*|h2v[12]_.*|int_upsample|sep_upsample"),
    ("colour", r"ycc_rgb|rgb_gray|gray_rgb|ycck|ycc_.*convert|color_convert|"
               r"null_convert|grayscale_convert|rgb_rgb"),
    ("skip", r"skip_scanlines|read_and_discard|noop_|jpeg_skip|increment_simple|"
             r"set_wraparound|read_and_discard_scanlines"),
    ("libjpeg other", r"^(jpeg_|jinit_|jdiv_|jround_|jcopy_|read_markers|get_sos|get_sof|"
                      r"alloc_|free_pool|realize_virt|access_virt|start_pass|start_input|"
                      r"finish_input|output_pass|prepare_range|tj|_tj|std_huff|"
                      r"jpeg_make_d_derived|jpeg_core_output|jsimd_)"),
    ("resize", r"image_resize|axis_init|^[hv]pass"),
    ("layout/flip", r"image_store"),
    ("copies", r"memcpy|memmove|__memcpy|__memmove"),
    ("allocation", r"malloc|_int_free|free$|cfree|calloc|realloc|mmap|munmap|brk|"
                   r"clear_page|page_fault|do_anonymous|handle_mm_fault|do_user_addr|"
                   r"exc_page_fault|asm_exc_page_fault|unmap|zap_|alloc_pages|"
                   r"get_page_from_freelist|__mod_|release_pages|lru_"),
    ("queueing", r"pthread_|futex|lll_lock|__lll|schedule|context_switch|finish_task|"
                 r"try_to_wake|wake_up|dequeue|enqueue|select_task|pick_next|"
                 r"cond_wait|cond_broadcast|cond_signal|sem_|mutex"),
]


def classify(dso, sym):
    if re.search(r"libjpeg|libturbojpeg", dso) and sym.startswith("0x"):
        return "libjpeg-turbo (unsplit)"
    for name, pat in STAGES:
        if re.search(pat, sym):
            return name
    if dso.startswith("[kernel") or sym.startswith("[k]"):
        return "kernel other"
    if re.search(r"python|libtorch|libc10|_C\.|numpy|libgomp|libopenblas|ld-linux", dso):
        return "python/torch"
    return "other"


def report(data):
    out = subprocess.run(
        ["perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "dso,sym",
         "--percent-limit", "0", "-q"],
        capture_output=True, text=True, check=True).stdout
    shares, tops = {}, {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[(.)\]\s+(.*)$", line)
        if not m:
            continue
        pct, dso, _, sym = float(m.group(1)), m.group(2), m.group(3), m.group(4).strip()
        stage = classify(dso, sym)
        shares[stage] = shares.get(stage, 0.0) + pct
        tops.setdefault(stage, []).append((pct, sym))
    order = ["libjpeg-turbo (unsplit)"] + [s for s, _ in STAGES] + [
        "kernel other", "python/torch", "other"]
    print(f"{'stage':<24}{'share':>8}  largest symbols")
    for s in order:
        if s not in shares:
            continue
        top = ", ".join(f"{sym} {p:.1f}" for p, sym in sorted(tops[s], reverse=True)[:3])
        print(f"{s:<24}{shares[s]:>7.1f}%  {top}")
    print(json.dumps({s: round(shares.get(s, 0.0), 2) for s in order}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="perf.data")
    ap.add_argument("--report")
    ap.add_argument("--delay", type=float, default=0.0)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    if a.report:
        report(a.report)
        return
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        sys.exit("image_profile.py: give a command after --")
    delay = ["-D", str(int(a.delay * 1000))] if a.delay > 0 else []
    rc = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", "2000", "-o", a.out]
                        + delay + ["--"] + cmd, env=os.environ).returncode
    if rc != 0:
        sys.exit(f"image_profile.py: the command failed ({rc})")
    report(a.out)


if __name__ == "__main__":
    main()
