#!/bin/bash
# WebDataset shards (hdmlp-pack --webdataset): members grouped by key, each extension a
# field, the .cls member the label.
#   - Two shards (.tar and .tar.gz) of samples with an image (.jpg, .png or .JPEG: one field,
#     "image") and a .cls, in varying member order: every sample once, keyed by its key,
#     bytes equal to its image member's, labelled by its class number; labels "0" to the
#     largest number in numeric order (a number no sample has is a label without samples,
#     reported); verify passes.
#   - The same with a .txt (absent from every fifth sample) and a .json member: fields cls,
#     image, json, txt (name order), txt not required; every field of every sample equals
#     its member; --info lists the fields; --extract writes a sample's present fields
#     (PREFIX.FIELD); verify passes.
#   - A JSONL manifest of the same samples (each member a file: --file-fields image,txt,json,
#     the class number in column cls: --label-field cls) packs into the same fields, labels
#     and values, sample for sample (hdmlp-pack --manifest).
#   - Errors naming the shard and the sample or member: a sample without a .cls member,
#     without any other member, with two images, a .cls that is not a class number or above
#     the largest allowed, a link member; a directory or list input with --webdataset.
#     Nothing is left behind by a failed run.
source "$(dirname "$0")/lib.sh"
need_dsdump

"$PYTHON" - "$T" <<'PY' || fail "generating the shards"
import hashlib, io, json, os, sys, tarfile
t = sys.argv[1]
manifest = []

def add(tf, name, data=None, link=None):
    ti = tarfile.TarInfo(name)
    ti.mtime = 0
    if link is not None:
        ti.type, ti.linkname = tarfile.SYMTYPE, link
        tf.addfile(ti)
    else:
        ti.size = len(data)
        tf.addfile(ti, io.BytesIO(data))

def fnv(b):
    h = 0xcbf29ce484222325
    for x in b:
        h = ((h ^ x) * 0x100000001b3) & 0xffffffffffffffff
    return h

for kind in ("cls", "fields"):
    want = []
    for shard, mode in ((0, "w"), (1, "w:gz")):
        name = os.path.join(t, "%s-%d.tar%s" % (kind, shard, ".gz" if mode == "w:gz" else ""))
        with tarfile.open(name, mode) as tf:
            for i in range(300):
                key = "s%d/%06d" % (shard, i)
                cls = (i * 7 + shard) % 12
                cls = 13 if cls == 5 else cls  # no sample has 5 (nor 12): labels without samples
                img = hashlib.sha256(key.encode()).digest() * (1 + i % 9)
                ext = ("jpg", "png", "JPEG")[i % 3]
                txt = b"a caption of " + key.encode() if i % 5 else None
                js = b'{"i": %d}' % i
                members = [(key + ".cls", b" %d\n" % cls), (key + "." + ext, img)]
                if kind == "fields":
                    members += [(key + ".json", js)] + ([(key + ".txt", txt)] if txt else [])
                if i % 2:
                    members.reverse()
                for m, d in members:
                    add(tf, m, d)
                if kind == "fields":  # the same sample as files and a manifest row
                    row = {"__key__": key, "cls": cls}
                    for e, d in ((ext, img), ("json", js), ("txt", txt)):
                        if d is not None:
                            path = "m/%s.%s" % (key, e)
                            os.makedirs(os.path.dirname(os.path.join(t, path)), exist_ok=True)
                            with open(os.path.join(t, path), "wb") as f:
                                f.write(d)
                            row["image" if e == ext else e] = path
                    manifest.append(json.dumps(row))
                line = "%s\t%d\t%d\t%016x" % (key, cls, len(img), fnv(img))
                if kind == "fields":
                    line = "%s\t%d\tcls=#%d\timage=%d:%016x\tjson=%d:%016x\ttxt=%s" % (
                        key, cls, cls, len(img), fnv(img), len(js), fnv(js),
                        "%d:%016x" % (len(txt), fnv(txt)) if txt else "-")
                want.append(line)
    with open(os.path.join(t, "want-" + kind), "w") as f:
        f.write("\n".join(sorted(want)) + "\n")
with open(os.path.join(t, "m.jsonl"), "w") as f:
    f.write("\n".join(manifest) + "\n")

def shard(name, members, links=()):
    with tarfile.open(os.path.join(t, name), "w") as tf:
        for m, d in members:
            add(tf, m, d)
        for m, target in links:
            add(tf, m, link=target)

ok = [("a.jpg", b"x"), ("a.cls", b"1")]
shard("nocls.tar", ok + [("b.jpg", b"y")])
shard("noimg.tar", ok + [("b.cls", b"2")])
shard("twoimg.tar", ok + [("b.jpg", b"y"), ("b.png", b"z"), ("b.cls", b"2")])
shard("badcls.tar", ok + [("b.jpg", b"y"), ("b.cls", b"two")])
shard("bigcls.tar", ok + [("b.jpg", b"y"), ("b.cls", b"16777216")])
shard("link.tar", ok, links=[("b.jpg", "a.jpg")])
PY

# --- two shards of images and classes -------------------------------------------------------
O=$T/ds
pk_ok --webdataset --seed 5 -j 2 -o "$O" "$T/cls-0.tar" "$T/cls-1.tar.gz"
grep -q "Packed 600 samples with 14 labels" "$LOG/stdout" || fail "summary: $(head -3 "$LOG/stdout")"
grep -q "2 of 14 labels have no samples: 5, 12" "$LOG/stdout" ||
    fail "labels without samples not reported: $(grep -i label "$LOG/stdout")"
ok
[ "$(hdr "$O" labels)" = 14 ] || fail "labels: $(hdr "$O" labels)"
"$DSDUMP" --header "$O" | grep -P '^# label\t' | cut -f2,3 >"$T/labels"
paste <(seq 0 13) <(seq 0 13) | diff - "$T/labels" >/dev/null ||
    fail "labels are not 0..13 numbered by value: $(tr '\n' ' ' <"$T/labels")"
ok
dump "$O" --hash | awk -F'\t' '{ print $3 "\t" $2 "\t" $4 "\t" $9 }' | LC_ALL=C sort >"$T/got"
diff "$T/want-cls" "$T/got" >"$LOG/diff" || fail "samples differ from the shards' ($(head -3 "$LOG/diff"))"
ok
verify_ok "$O" "two shards"

# --- two shards with captions and JSON: fields ---------------------------------------------
F=$T/fields
pk_ok --webdataset --seed 5 -j 2 -o "$F" "$T/fields-0.tar" "$T/fields-1.tar.gz"
grep -q "Packed 600 samples with 14 labels" "$LOG/stdout" || fail "fields summary: $(head -3 "$LOG/stdout")"
dump "$F" --hash | awk -F'\t' '{ print $3 "\t" $2 "\t" $10 "\t" $11 "\t" $12 "\t" $13 }' |
    LC_ALL=C sort >"$T/got"
diff "$T/want-fields" "$T/got" >"$LOG/diff" || fail "fields differ from the members ($(head -3 "$LOG/diff"))"
ok
"$PACK" --info "$F" >"$LOG/info" || fail "--info of a dataset with fields"
grep -q "^fields        4, samples delivered as field records" "$LOG/info" || fail "--info: $(grep -A4 fields "$LOG/info")"
grep -Eq "^  txt +text +480 samples" "$LOG/info" || fail "--info txt: $(grep txt "$LOG/info")"
grep -Eq "^  image +image +required  600 samples" "$LOG/info" || fail "--info image: $(grep image "$LOG/info")"
ok
verify_ok "$F" "fields"
"$PACK" --extract "$F" s0/000001 -o "$T/x" >"$LOG/extract" || fail "--extract of a sample with fields"
[ "$(cat "$T/x.cls")" = 7 ] && [ "$(cat "$T/x.txt")" = "a caption of s0/000001" ] &&
    [ "$(cat "$T/x.json")" = '{"i": 1}' ] && [ -s "$T/x.image" ] ||
    fail "--extract fields: $(tr '\n' ' ' <"$LOG/extract")"
"$PACK" --extract "$F" s0/000005 -o "$T/y" >/dev/null && [ ! -e "$T/y.txt" ] ||
    fail "--extract wrote an absent field"
"$PACK" --extract "$F" s0/000001 >/dev/null 2>"$LOG/stderr" && fail "--extract of fields to stdout"
grep -q "give -o PREFIX" "$LOG/stderr" || fail "--extract without -o: $(cat "$LOG/stderr")"
ok

# --- the same samples from a manifest ---------------------------------------------------------
M=$T/manifest
pk_ok --manifest "$T/m.jsonl" --file-fields image,txt,json --label-field cls --seed 5 -o "$M"
grep -q "Packed 600 samples with 14 labels" "$LOG/stdout" || fail "manifest summary: $(head -3 "$LOG/stdout")"
dump "$M" --hash | awk -F'\t' '{ print $3 "\t" $2 "\t" $10 "\t" $11 "\t" $12 "\t" $13 }' |
    LC_ALL=C sort >"$T/got"
diff "$T/want-fields" "$T/got" >"$LOG/diff" || fail "manifest fields differ from the files ($(head -3 "$LOG/diff"))"
verify_ok "$M" "manifest"
ok

# --- errors ------------------------------------------------------------------------------
E=$T/err
check_error() { # check_error SHARD PATTERN WHAT
    pk --webdataset -o "$E" "$T/$1"
    expect_fail "$3"
    expect_stderr_fixed "$T/$1" "$3"
    expect_stderr "$2" "$3"
    nothing_left "$E" "$3"
}
check_error nocls.tar 'sample b has no \.cls member' "no .cls"
check_error noimg.tar 'sample b has no member besides its \.cls' "no image"
check_error twoimg.tar 'sample b has two image members \(the second: b\.png\)' "two images"
check_error badcls.tar 'member b\.cls: not a class number' "bad .cls"
check_error bigcls.tar 'member b\.cls: not a class number \(a decimal integer 0\.\.16777215\)' "too large .cls"
check_error link.tar 'member b\.jpg is not a regular file' "link member"

mkdir -p "$T/dir/c"
echo x >"$T/dir/c/a.jpg"
pk --webdataset -o "$E" "$T/dir"
expect_fail "directory input"
expect_stderr 'a directory input with --webdataset' "directory input"
nothing_left "$E" "directory input"
printf '%s\tc\n' "$T/dir/c/a.jpg" >"$T/in.list"
pk --webdataset -o "$E" --list "$T/in.list"
expect_fail "list input"
expect_stderr 'a list input with --webdataset' "list input"
nothing_left "$E" "list input"

finish
