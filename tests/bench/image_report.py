#!/usr/bin/python3
"""Renders image_bench.sh's results.jsonl: warm images/s (medians over rounds) with ratios
to ImageFolder on the same bytes, throughput vs the loader's thread split, the cold
epoch in regime A, and the decode floor (libjpeg-turbo alone on 2 threads) beside the
pipeline and ImageFolder on both image sets, with the ratios.

    image_report.py OUT/results.jsonl
"""
import json
import statistics
import sys


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    meta = next((r["meta"] for r in rows if "meta" in r), {})
    by = {}
    for r in rows:
        if "section" in r:
            by.setdefault((r["section"], r["tag"]), []).append(r)
    print(f"image_bench  {meta.get('date')}  rev {meta.get('rev')}  cpus {meta.get('cpus')}  "
          f"count {meta.get('count')}  subset {meta.get('subset')}  rounds {meta.get('repeat')}")

    def ips(section, tag):
        return med([(r["result"] or {}).get("images_per_s") for r in by.get((section, tag), [])])

    sections = {s for (s, _) in by}
    if "warm" in sections:
        warm(by, ips)
    if "split" in sections:
        split(by, ips)
    if "floor" in sections:
        floor(by, ips, med)
    if "A" in sections:
        cold(by, meta, med)


def warm(by, ips):
    print("\nwarm: images/s to 224x224 RandomResizedCrop + flip uint8 batches (median)")
    print(f"{'contender':<34}{'images/s':>10}{'vs ImageFolder':>16}")
    names = {"hdmlp:orig": "hdmlp pipeline, original JPEGs",
             "imagefolder:orig": "ImageFolder + PIL, W=2, original",
             "hdmlp-pil:orig": "hdmlp bytes + PIL, W=2, original",
             "hdmlp:prep": "hdmlp pipeline, prepared (256 px)",
             "imagefolder:prep": "ImageFolder + PIL, W=2, prepared"}
    for tag, label in names.items():
        v = ips("warm", tag)
        base = ips("warm", "imagefolder:" + tag.split(":")[1])
        ratio = f"{v / base:.2f}x" if v and base else "-"
        orig = ips("warm", "imagefolder:orig")
        extra = f"  ({v / orig:.2f}x ImageFolder on the originals)" if (
            tag == "hdmlp:prep" and v and orig) else ""
        print(f"{label:<34}{v or 0:>10.1f}{ratio:>16}{extra}")



def split(by, ips):
    print("\nthread split (hdmlp pipeline, original JPEGs, warm; I/O:decode threads)")
    splits = {t: ips("split", t) for (s, t) in by if s == "split"}
    manual = {t: v for t, v in splits.items() if not t.endswith(":0") and v}
    best = max(manual.values()) if manual else None
    for t, v in sorted(splits.items()):
        what = "auto" if t.endswith(":0") else "manual"
        ratio = f"{v / best:.2f} of the best manual" if v and best else ""
        last = [(r["result"] or {}) for r in by[("split", t)]]
        act = ", ".join(f"{x.get('io_threads_active')}:{x.get('decode_threads_active')}"
                        for x in last)
        print(f"  {t:<5} {what:<7}{v or 0:>9.1f} images/s  {ratio}  (split at the end: {act})")



def floor(by, ips, med):
    print("\nfloor: the same files, the same 2 cores, the same run (median of rounds; "
          "floor = libjpeg-turbo alone decoding to RGB on 2 threads, jpeg_floor.c)")
    print("(of floor: wall images/s over the floor's; cpu: the floor's CPU s/image over "
          "the pipeline process's; entropy: its share of a full decode)")
    print(f"{'set':<8}{'who':<12}{'images/s':>10}{'of floor':>10}{'cpu':>7}{'vs IF':>8}"
          f"{'ms cpu/img':>12}  rounds (of floor)")

    def col(st, who, key):
        return med([(r["result"] or {}).get(key) for r in by.get(("floor", f"{st}:{who}"), [])])

    for st in ("photos", "small"):
        fl, imf = ips("floor", st + ":floor"), ips("floor", st + ":imagefolder")
        fl_cpu = col(st, "floor", "cpu_s_per_image")
        ent = col(st, "floor", "entropy_s_per_image")
        for who in ("floor", "hdmlp", "hdmlp-base", "imagefolder"):
            v = ips("floor", f"{st}:{who}")
            if v is None:
                continue
            cpu = col(st, who, "cpu_s_per_image")
            of = f"{v / fl:.2f}" if fl else "-"
            cpu_r = f"{fl_cpu / cpu:.2f}" if (cpu and fl_cpu and who != "floor") else "-"
            vs = f"{v / imf:.2f}" if imf else "-"
            per = [((a["result"] or {}).get("images_per_s"), (b["result"] or {}).get(
                "images_per_s")) for a, b in zip(by.get(("floor", f"{st}:{who}"), []),
                                                 by.get(("floor", st + ":floor"), []))]
            rounds = ", ".join(f"{h / f:.2f}" for h, f in per if h and f)
            extra = (f"  (per core {1 / fl_cpu:.0f}/s; entropy {ent / fl_cpu:.0%} of a decode)"
                     if who == "floor" and fl_cpu and ent else "")
            print(f"{st:<8}{who:<12}{v:>10.1f}{of:>10}{cpu_r:>7}{vs:>8}"
                  f"{(f'{cpu * 1e3:.2f}' if cpu else '-'):>12}  {rounds}{extra}")



def cold(by, meta, med):
    print("\ncold epoch in the cell, regime A (150 read ops/s + 400 MB/s), subset of "
          f"{meta.get('subset')} images ({(meta.get('subset_bytes') or 0) / 1e6:.0f} MB)")
    print(f"{'contender':<22}{'wall s':>9}{'images/s':>10}{'vs IF':>8}{'disk MB':>10}"
          f"{'hdmlp MB':>10}{'peak MiB':>10}")
    base = None
    for who in ("imagefolder", "hdmlp", "hdmlp-pil"):
        rs = by.get(("A", who), [])
        wall = med([r["cell"]["wall_seconds"] for r in rs if r.get("cell")])
        n = med([(r["result"] or {}).get("images") for r in rs])
        v = med([(r["result"] or {}).get("images_per_s") for r in rs])
        disk = med([r["cell"].get("dev_read_bytes") for r in rs if r.get("cell")])
        hb = med([(r["result"] or {}).get("bytes_read") for r in rs])
        peak = med([r["cell"].get("peak_memory") for r in rs if r.get("cell")])
        if who == "imagefolder":
            base = v
        ratio = f"{v / base:.2f}x" if v and base else "-"
        print(f"{who:<22}{wall or 0:>9.1f}{v or 0:>10.1f}{ratio:>8}{(disk or 0) / 1e6:>10.0f}"
              f"{(hb or 0) / 1e6:>10.0f}{(peak or 0) / 2**20:>10.0f}"
              f"{'' if n is None else f'  ({n:.0f} images)'}")


if __name__ == "__main__":
    main()
