#!/bin/bash
# Pack-time image preparation: --image-max-side N --image-quality Q re-encodes JPEG and PNG
# samples whose longer side exceeds N as JPEG (aspect kept, pixels close to PIL's area
# resize), leaves everything else byte for byte, warns about and keeps images it cannot
# decode, grows chunks when a re-encoded image is longer than its source, stays
# reproducible across thread counts; --info prints image statistics; bad values are usage
# errors.
source "$(dirname "$0")/lib.sh"

"$PYTHON" -c 'import PIL, numpy' 2>/dev/null || { skip "no PIL/numpy in $PYTHON"; exit 77; }

IN=$T/in
"$PYTHON" - "$IN" <<'EOF' || fail "making the test images failed"
import os, struct, sys, zlib
import numpy as np
from PIL import Image
root = sys.argv[1]
rng = np.random.default_rng(12)
for d in ("a", "b", "c"):
    os.makedirs(os.path.join(root, d), exist_ok=True)
def img(w, h):
    x = np.linspace(0, 255, w)[None, :, None]
    y = np.linspace(0, 255, h)[:, None, None]
    return (x * 0.6 + y * 0.4 + rng.normal(0, 8, (h, w, 3))).clip(0, 255).astype("uint8")
Image.fromarray(img(400, 300)).save(f"{root}/a/big.jpg", quality=95)
Image.fromarray(img(100, 80)).save(f"{root}/a/small.jpg")
Image.fromarray(img(150, 450)).convert("L").save(f"{root}/a/gray.jpg")
rgba = np.dstack([img(320, 240), np.full((240, 320), 100, "uint8")])
Image.fromarray(rgba, "RGBA").save(f"{root}/b/alpha.png")
Image.fromarray(img(64, 64)).save(f"{root}/b/small.png")
data = open(f"{root}/a/big.jpg", "rb").read()
open(f"{root}/b/trunc.jpg", "wb").write(data[: len(data) // 3])
open(f"{root}/b/text.txt", "w").write("not an image " * 50)
# hostile headers: a PNG claiming 100000 x 100000 pixels, a JPEG frame of 65535 x 65535
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0))
png += chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")
open(f"{root}/c/huge.png", "wb").write(png)
sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, 65535, 65535, 1) + b"\x01\x11\x00"
open(f"{root}/c/huge.jpg", "wb").write(b"\xff\xd8" + sof + b"\xff\xd9")
# a flat 900 x 900 PNG: a few hundred bytes, its JPEG at quality 100 is longer
Image.fromarray(np.full((900, 900, 3), 77, "uint8")).save(f"{root}/c/flat.png")
EOF
ok

# size_of FILE: "WxH MODE FORMAT" through PIL
size_of() {
    "$PYTHON" -c 'import sys; from PIL import Image; i = Image.open(sys.argv[1]); print("%dx%d %s %s" % (i.size[0], i.size[1], i.mode, i.format))' "$1"
}

# ---- usage errors -------------------------------------------------------------------------
pk --image-max-side 0 -o "$T/x" "$IN"
expect_rc 2 "--image-max-side 0"
expect_stderr "image-max-side must be" "--image-max-side 0"
pk --image-max-side 128 --image-quality 101 -o "$T/x" "$IN"
expect_rc 2 "--image-quality 101"
pk --image-quality 80 -o "$T/x" "$IN"
expect_rc 2 "--image-quality without --image-max-side"
expect_stderr "needs --image-max-side" "--image-quality alone"
pk --info "$IN" --image-max-side 64
expect_rc 2 "--image-max-side with --info"

# ---- prepare ------------------------------------------------------------------------------
export SOURCE_DATE_EPOCH=1700000000
pk_ok --seed 3 -j 2 --image-max-side 128 --image-quality 85 -o "$T/d2" "$IN"
grep -q '^Images: 4 re-encoded' "$LOG/stdout" || fail "summary: $(grep Images "$LOG/stdout")"
grep -q '3 over the limit kept' "$LOG/stdout" || fail "kept count: $(grep Images "$LOG/stdout")"
ok
for k in b/trunc.jpg c/huge.png c/huge.jpg; do
    grep -qF "warning: $k:" "$LOG/stderr" || fail "no warning names $k"
done
grep -qF "warning: a/big.jpg" "$LOG/stderr" && fail "a warning about a good image"
ok
verify_ok "$T/d2" "prepared pack"

# extract every sample: sizes, formats, untouched bytes
total=0
for k in a/big.jpg a/small.jpg a/gray.jpg b/alpha.png b/small.png b/trunc.jpg b/text.txt \
    c/huge.png c/huge.jpg c/flat.png; do
    pk --extract "$T/d2" "$k" -o "$T/x_${k//\//_}"
    [ "$RC" = 0 ] || fail "--extract $k"
    total=$((total + $(stat -c %s "$T/x_${k//\//_}")))
done
expect_size() {
    local got
    got=$(size_of "$T/x_${1//\//_}")
    [ "$got" = "$2" ] || fail "$1: got $got, want $2"
    ok
}
expect_size a/big.jpg "128x96 RGB JPEG"
expect_size a/gray.jpg "43x128 L JPEG"
expect_size b/alpha.png "128x96 RGB JPEG"
expect_size c/flat.png "128x128 RGB JPEG"
for k in a/small.jpg b/small.png b/trunc.jpg b/text.txt c/huge.png c/huge.jpg; do
    cmp -s "$T/x_${k//\//_}" "$IN/$k" || fail "$k was changed"
done
ok
# the re-encoded pixels are close to PIL's area (box) resize of the source
"$PYTHON" - "$IN" "$T" <<'EOF' || fail "re-encoded pixels differ from PIL's box resize"
import sys
import numpy as np
from PIL import Image
src, t = sys.argv[1], sys.argv[2]
for k in ("a/big.jpg", "a/gray.jpg", "b/alpha.png"):
    got = Image.open(f"{t}/x_{k.replace('/', '_')}")
    ref = Image.open(f"{src}/{k}").convert(got.mode).resize(got.size, Image.BOX)
    d = np.asarray(got, dtype=float) - np.asarray(ref, dtype=float)
    psnr = 10 * np.log10(255**2 / max((d**2).mean(), 1e-9))
    print(f"{k}: PSNR {psnr:.1f} dB against PIL's box resize")
    if psnr < 30:
        sys.exit(1)
EOF
ok

# the index's raw bytes are the re-encoded sizes
pk_ok --info "$T/d2"
grep -q "^raw bytes     $total " "$LOG/stdout" || fail "raw bytes: $(grep '^raw bytes' "$LOG/stdout") != $total"
grep -q '^images        10 of 10 samples read: jpeg 7, png 2, other 1' "$LOG/stdout" ||
    fail "--info images: $(grep '^images' "$LOG/stdout")"
grep -q '^image longer  .*max 128$' "$LOG/stdout" && fail "huge headers are images too: max should be 100000"
grep -q '^image longer  .*max 100000$' "$LOG/stdout" || fail "--info: $(grep '^image longer' "$LOG/stdout")"
grep -q '^image bytes   mean' "$LOG/stdout" || fail "--info has no image bytes line"
ok

# a re-encoded image longer than its source (a flat PNG at quality 100) grows its chunk
mkdir -p "$T/flat/c"
cp "$IN/c/flat.png" "$T/flat/c/"
cp "$IN/b/text.txt" "$T/flat/c/"
pk_ok -q --seed 3 --chunk-size 2 --image-max-side 800 --image-quality 100 -o "$T/dflat" "$T/flat"
verify_ok "$T/dflat" "flat pack"
pk --extract "$T/dflat" c/flat.png -o "$T/flat.jpg"
[ "$(size_of "$T/flat.jpg")" = "800x800 RGB JPEG" ] || fail "flat: $(size_of "$T/flat.jpg")"
[ "$(stat -c %s "$T/flat.jpg")" -gt "$(stat -c %s "$IN/c/flat.png")" ] ||
    fail "flat: the re-encoded image is not longer than its source; the test needs one"
pk --extract "$T/dflat" c/text.txt -o "$T/flat.txt"
cmp -s "$T/flat.txt" "$IN/b/text.txt" || fail "flat: the sample after the grown one changed"
ok

# reproducible across thread counts
pk_ok -q --seed 3 -j 1 --image-max-side 128 --image-quality 85 -o "$T/d1" "$IN"
[ "$(tree_hash "$T/d1")" = "$(tree_hash "$T/d2")" ] || fail "-j 1 and -j 2 differ"
ok

# without the option every byte is kept; --info on it still reads the image headers
pk_ok -q --seed 3 -o "$T/plain" "$IN"
pk --extract "$T/plain" a/big.jpg -o "$T/plain_big.jpg"
cmp -s "$T/plain_big.jpg" "$IN/a/big.jpg" || fail "a pack without --image-max-side changed a/big.jpg"
pk_ok --info "$T/plain"
grep -q '^image longer  mean .* max 100000$' "$LOG/stdout" || fail "--info on a plain pack"
ok

finish
