# shellcheck shell=bash disable=SC2034 # (sets variables for the scripts that source it)
# Mechanism shared by the benchmark scripts of tests/bench/ (bench_loader.sh, dist_bench.sh,
# tiers_bench.sh, frontier_bench.sh, netns_bench.sh,
# local_ranks_bench.sh): options, logging, the binaries, the benchmark cell
# (cgroup v1 memory limit incl. page cache + blkio read throttle, caches dropped before
# every run), dataset trees and packing, run records. What a benchmark measures (its runs,
# datasets, budgets, cost models, records, meta.json and report) stays in its script.
#
# Use, at the top of a script (set -u and pipefail are fine):
#   HERE=$(cd "$(dirname "$0")" && pwd)
#   BENCH_NAME=name_in_messages
#   . "$HERE/bench_lib.sh"
# Sourcing defines the functions below and these defaults, and runs nothing else:
#   SRC    the source tree (HERE/../..)          BUILD  SRC/build (--build)
#   PY     /usr/bin/python3 (bench_tools: else python3 on PATH)
#   SMALL  0 (--small)    KEEP  0 (--keep-data)    PACK_SEED  7 (every benchmark's packs)
# The script sets OUT and WORK (its defaults) before parsing options.
# Each function's comment says which variables it reads and sets besides these.

SRC=$(cd "$HERE/../.." && pwd)
BUILD=$SRC/build
PY=/usr/bin/python3
SMALL=0
KEEP=0
PACK_SEED=7

# ---- messages -----------------------------------------------------------------------------
# log MSG...: "[BENCH_NAME HH:MM:SS] MSG" on stderr.
log() { echo "[$BENCH_NAME $(date +%H:%M:%S)] $*" >&2; }
# die MSG...: "BENCH_NAME: MSG" on stderr, exit 1.
die() { echo "$BENCH_NAME: $*" >&2; exit 1; }
# skip MSG...: "BENCH_NAME: SKIP: MSG" on stdout, exit 0 (the machine cannot run the benchmark).
skip() { echo "$BENCH_NAME: SKIP: $*"; exit 0; }

# ---- options ------------------------------------------------------------------------------
# bench_usage [STATUS]: prints the script's header comment (from line 2 to the first line
# that is not a comment, without the leading '# ') and exits STATUS (default 2).
bench_usage() {
    awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
    exit "${1:-2}"
}

# bench_option ARGS...: the options every benchmark takes, for the script's option loop,
# after its own: --build DIR (BUILD), --out DIR (OUT), --work DIR (WORK), --small (SMALL=1),
# --keep-data (KEEP=1), -h/--help (usage, exit 0). Sets BENCH_SHIFT to the number of words
# it used. Anything else: "BENCH_NAME: unknown option", the usage, exit 2.
#   while [ $# -gt 0 ]; do
#       case $1 in
#       --epochs) EPOCHS=${2:?}; shift 2 ;;
#       *) bench_option "$@"; shift "$BENCH_SHIFT" ;;
#       esac
#   done
bench_option() {
    BENCH_SHIFT=1
    case $1 in
    --build) BUILD=${2:?}; BENCH_SHIFT=2 ;;
    --out) OUT=${2:?}; BENCH_SHIFT=2 ;;
    --work) WORK=${2:?}; BENCH_SHIFT=2 ;;
    --small) SMALL=1 ;;
    --keep-data) KEEP=1 ;;
    -h | --help) bench_usage 0 ;;
    *) echo "$BENCH_NAME: unknown option '$1'" >&2; bench_usage 2 ;;
    esac
}

# ---- programs -----------------------------------------------------------------------------
# bench_tools: sets BENCH and PACK (HDMLP_BENCH / HDMLP_PACK, else hdmlp-bench and hdmlp-pack
# under BUILD) and dies unless both are executable; PY falls back to python3 on PATH.
bench_tools() {
    BENCH=${HDMLP_BENCH:-$BUILD/loader/hdmlp-bench}
    PACK=${HDMLP_PACK:-$BUILD/packer/hdmlp-pack}
    [ -x "$BENCH" ] || die "no hdmlp-bench at $BENCH (build it, or pass --build DIR / set HDMLP_BENCH)"
    [ -x "$PACK" ] || die "no hdmlp-pack at $PACK (build it, or pass --build DIR / set HDMLP_PACK)"
    [ -x "$PY" ] || PY=$(command -v python3)
}

# bench_need_option FLAG: skips unless `hdmlp-bench --help` lists FLAG. Needs BENCH.
bench_need_option() {
    case $("$BENCH" --help 2>&1) in *"$1"*) ;; *) skip "$BENCH has no $1" ;; esac
}

# bench_need_numpy: dies unless PY imports numpy.
bench_need_numpy() {
    "$PY" -c 'import numpy' 2>/dev/null || die "$PY cannot import numpy (apt-get install python3-numpy)"
}

# bench_need_root WHY: skips unless run as root; WHY (what needs it) goes into the message.
bench_need_root() {
    [ "$(id -u)" = 0 ] || skip "needs root ($1)"
}

# ---- directories and clean-up -------------------------------------------------------------
# bench_dirs: creates WORK and OUT/logs and makes WORK and OUT absolute.
bench_dirs() {
    mkdir -p "$WORK" "$OUT/logs" || die "cannot create $WORK or $OUT"
    WORK=$(cd "$WORK" && pwd)
    OUT=$(cd "$OUT" && pwd)
}

# bench_traps HOOK: on exit, removes the cell's cgroups (if cell_init made a cell), runs
# HOOK (the script's own clean-up function; `:` for none), then removes WORK unless KEEP=1;
# INT and TERM exit 130 (through the same clean-up).
bench_traps() {
    BENCH_CLEANUP_HOOK=$1
    trap bench_cleanup EXIT
    trap 'exit 130' INT TERM
}
bench_cleanup() {
    cell_remove
    "$BENCH_CLEANUP_HOOK"
    if [ "$KEEP" = 0 ] && [ -n "${WORK:-}" ] && [ -d "$WORK" ]; then
        rm -rf "$WORK"
    fi
}

# ---- the benchmark cell -------------------------------------------------------------------
# drop_caches: writes back dirty pages and drops the page cache, dentries and inodes (root).
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# cg_dir CONTROLLER: this process's own cgroup v1 directory of CONTROLLER (memory, blkio).
cg_dir() { echo "/sys/fs/cgroup/$1$(awk -F: -v c="$1" '$2 == c { print $3 }' /proc/self/cgroup)"; }

# cell_init NAME: the cell is cgroup NAME (make it unique, e.g. with $$) below this process's
# own memory and blkio groups; sets MEMCG, BLKCG and CELL. Skips when either controller is
# not writable or caches cannot be dropped. Needs root (bench_need_root first).
cell_init() {
    MEMCG=$(cg_dir memory)
    BLKCG=$(cg_dir blkio)
    CELL=$1
    local d
    for d in "$MEMCG" "$BLKCG"; do
        if ! { [ -w "$d" ] && mkdir "$d/$CELL.probe" 2>/dev/null && rmdir "$d/$CELL.probe"; }; then
            skip "cgroup v1 controller $d is not writable"
        fi
    done
    [ -w /proc/sys/vm/drop_caches ] || skip "cannot drop caches"
}

# cell_remove: removes the cell's cgroups if they are left (bench_cleanup calls it).
cell_remove() {
    [ -n "${CELL:-}" ] || return 0
    local d
    for d in "$MEMCG/$CELL" "$BLKCG/$CELL"; do
        [ -d "$d" ] && rmdir "$d" 2>/dev/null
    done
    return 0
}

# disk_of DIR: the disk DIR is on: sets DISK_SOURCE (the source of DIR's file system),
# DISK (the whole disk holding it: a partition's parent, else DISK_SOURCE) and DISK_DEV
# (DISK's MAJ:MIN, empty when it has none).
disk_of() {
    local parent
    DISK_SOURCE=$(findmnt -no SOURCE --target "$1" | head -1)
    parent=$(lsblk -no PKNAME "$DISK_SOURCE" 2>/dev/null | head -1)
    DISK=${parent:+/dev/$parent}
    DISK=${DISK:-$DISK_SOURCE}
    DISK_DEV=$(lsblk -dno MAJ:MIN "$DISK" 2>/dev/null | tr -d ' ')
}

# cell_disk DIR: the cell throttles and counts the disk DIR is on: sets DISK, DEV (its
# MAJ:MIN), CELL_THROTTLE and CELL_COUNTERS (as "dev"); skips when DIR is not on a block
# device or the disk has no MAJ:MIN.
cell_disk() {
    disk_of "$1"
    [ -b "$DISK_SOURCE" ] || skip "$1 is not on a block device ($DISK_SOURCE): blkio cannot throttle it"
    [ -n "$DISK_DEV" ] || skip "cannot find MAJ:MIN of $DISK"
    DEV=$DISK_DEV
    CELL_THROTTLE=$DEV
    CELL_COUNTERS="dev=$DEV"
}

# dev_read FILE DEV: the Read value of device DEV (MAJ:MIN) in a blkio stat FILE.
dev_read() { awk -v d="$2" '$1 == d && $2 == "Read" { print $3 }' "$1"; }

# cell_run TAG MEM_LIMIT BPS IOPS -- CMD...: runs CMD (and every process it starts) in a
# fresh cell: at most MEM_LIMIT bytes of memory (page cache included), reads from device
# CELL_THROTTLE (MAJ:MIN) throttled to BPS bytes/s and IOPS ops/s (0: not throttled). Before
# CMD starts: caches dropped, then the script's function `prewarm CMD...` runs outside the
# cell (to load programs, not data). CMD's stdout goes to OUT/logs/TAG.out, its stderr to
# OUT/logs/TAG.err. Sets CELL_JSON: {"rc", "wall_seconds", "memory_limit", "read_bps",
# "read_iops", "peak_memory", then "KEY_read_bytes", "KEY_read_ops" for each KEY=MAJ:MIN of
# CELL_COUNTERS (space-separated, in order), "oom_kills"}. Returns CMD's status; dies when
# the cell cannot be set up. Needs cell_init, CELL_THROTTLE, CELL_COUNTERS, OUT.
cell_run() {
    local tag=$1 mem=$2 bps=$3 iops=$4
    shift 5
    local m=$MEMCG/$CELL b=$BLKCG/$CELL t0 t1 rc peak oom c bytes ops
    rmdir "$m" "$b" 2>/dev/null
    mkdir "$m" "$b" || die "cannot create cgroup $CELL"
    echo "$mem" >"$m/memory.limit_in_bytes" || die "cannot set the memory limit"
    if [ "$bps" -gt 0 ]; then
        echo "$CELL_THROTTLE $bps" >"$b/blkio.throttle.read_bps_device" || die "cannot throttle $CELL_THROTTLE"
    fi
    if [ "$iops" -gt 0 ]; then
        echo "$CELL_THROTTLE $iops" >"$b/blkio.throttle.read_iops_device" || die "cannot throttle $CELL_THROTTLE"
    fi
    drop_caches
    prewarm "$@"
    t0=$(date +%s.%N)
    sh -c 'echo $$ >"$1/cgroup.procs" && echo $$ >"$2/cgroup.procs" && shift 2 && exec "$@"' \
        cell "$m" "$b" "$@" >"$OUT/logs/$tag.out" 2>"$OUT/logs/$tag.err"
    rc=$?
    t1=$(date +%s.%N)
    peak=$(cat "$m/memory.max_usage_in_bytes")
    oom=$(awk '$1 == "oom_kill" { print $2 }' "$m/memory.oom_control")
    CELL_JSON="{\"rc\": $rc, \"wall_seconds\": $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }'), \"memory_limit\": $mem,"
    CELL_JSON+=" \"read_bps\": $bps, \"read_iops\": $iops, \"peak_memory\": ${peak:-0},"
    for c in $CELL_COUNTERS; do
        bytes=$(dev_read "$b/blkio.throttle.io_service_bytes" "${c#*=}")
        ops=$(dev_read "$b/blkio.throttle.io_serviced" "${c#*=}")
        CELL_JSON+=" \"${c%%=*}_read_bytes\": ${bytes:-0}, \"${c%%=*}_read_ops\": ${ops:-0},"
    done
    CELL_JSON+=" \"oom_kills\": ${oom:-0}}"
    # the cgroups empty when the last process of CMD has gone (MPI daemons take a moment)
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        rmdir "$m" "$b" 2>/dev/null && break
        sleep 0.3
    done
    return $rc
}

# ---- datasets -----------------------------------------------------------------------------
# tree_ready DIR COUNT: true when DIR holds a generated tree of COUNT files (its sizes.json).
tree_ready() { [ -f "$1/sizes.json" ] && grep -q "\"count\": $2," "$1/sizes.json"; }

# gen_tree NAME COUNT MEAN SIGMA SEED: WORK/NAME, a tree of COUNT files of lognormal sizes
# (mean MEAN bytes, sigma SIGMA; loader_gen.py tree: files/, list.tsv, sizes.json), kept
# when it already has COUNT files.
gen_tree() {
    local dir=$WORK/$1
    tree_ready "$dir" "$2" && return 0
    rm -rf "$dir"
    log "generating $1: $2 files, mean $3 B, sigma $4"
    "$PY" "$HERE/loader_gen.py" tree "$dir" --count "$2" --mean "$3" --sigma "$4" --seed "$5" ||
        die "cannot generate $1"
}

# gen_subset NAME FROM COUNT: WORK/NAME, hard links to the first COUNT files of the tree
# WORK/FROM (loader_gen.py subset), kept when it already has COUNT files.
gen_subset() {
    local dir=$WORK/$1
    tree_ready "$dir" "$3" && return 0
    rm -rf "$dir"
    "$PY" "$HERE/loader_gen.py" subset "$dir" --from "$WORK/$2" --count "$3" || die "cannot subset $2"
}

# tree_bytes NAME: the bytes of the files of the tree WORK/NAME (from its sizes.json).
tree_bytes() {
    awk -F'[:,]' '{ for (i = 1; i < NF; i++) if ($i ~ /"bytes"/) { gsub(/ /, "", $(i + 1)); print $(i + 1) } }' \
        "$WORK/$1/sizes.json"
}

# pack_into DIR INPUT K LOGNAME: hdmlp-pack of INPUT (a tree or a tar) into DIR, K samples a
# chunk, seed PACK_SEED, uncompressed, 2 threads; its output in OUT/logs/pack-LOGNAME.log;
# dies when it fails. Needs PACK.
pack_into() {
    local log=$OUT/logs/pack-$4.log
    "$PACK" --chunk-size "$3" --seed "$PACK_SEED" --compress none --threads 2 --quiet --force \
        -o "$1" "$2" >"$log" 2>&1 || die "hdmlp-pack failed for $(basename "$1"): $(tail -3 "$log")"
}

# pack NAME INPUT K: pack_into WORK/NAME, kept across runs while INPUT, K and PACK_SEED are
# the same (WORK/NAME.stamp records them and INPUT's mtime).
pack() {
    local dir=$WORK/$1 stamp
    stamp="$2 K=$3 seed=$PACK_SEED $(stat -c %Y "$2")"
    if [ -f "$dir/index" ] && [ "$(cat "$WORK/$1.stamp" 2>/dev/null)" = "$stamp" ]; then
        return 0
    fi
    log "packing $1 (K=$3)"
    pack_into "$dir" "$2" "$3" "$1"
    echo "$stamp" >"$WORK/$1.stamp"
}

# local_ranks_data: the local-ranks benchmarks' dataset, WORK/ds: COUNT files of lognormal
# sizes (mean 24 KiB, sigma 0.6), packed K=16 and read once into the page cache; sets RAW
# (its bytes).
local_ranks_data() {
    gen_tree tree "$COUNT" 24576 0.6 23
    pack ds "$WORK/tree/files" 16
    cat "$WORK/ds"/* >/dev/null
    RAW=$(du -sb "$WORK/ds" | cut -f1)
}

# rank_budget R: a rank's budget, MEMORY percent of its 1/R share of RAW, at least 48 MiB.
rank_budget() {
    local b=$((RAW * MEMORY / 100 / $1))
    echo $((b >= 48 << 20 ? b : 48 << 20))
}

# free_ports N: N free TCP ports on 127.0.0.1, space-separated (tests/support/free_ports.py).
free_ports() { "$PY" "$SRC/tests/support/free_ports.py" "$1"; }

# peer_list R: R free ports on 127.0.0.1 as a --peers list.
peer_list() { free_ports "$1" | awk '{ for (i = 1; i <= NF; i++) printf "%s127.0.0.1:%s", (i > 1 ? "," : ""), $i }'; }

# ---- records ------------------------------------------------------------------------------
# last_json FILE: the last line of FILE that starts with '{' (a program's --json result);
# nothing when there is none or no FILE.
last_json() { grep '^{' "$1" 2>/dev/null | tail -1; }

# loadavg: the 1-, 5- and 15-minute load averages ("2.01 1.50 1.20"), logged with runs
# because other jobs on the machine skew timings.
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# meta_host: the fields every meta.json starts with: "date": "…", "kernel": "…", "cpus": N
meta_host() { echo "\"date\": \"$(date -u +%FT%TZ)\", \"kernel\": \"$(uname -r)\", \"cpus\": $(nproc)"; }

# git_rev: the source tree's short commit (the file SRC/GITREV outside git), else "unknown".
git_rev() { git -C "$SRC" rev-parse --short HEAD 2>/dev/null || cat "$SRC/GITREV" 2>/dev/null || echo unknown; }
