#!/usr/bin/env bash
# examples/image_batches.c end to end: 40 JPEG and PNG photographs-to-be (Pillow draws them),
# packed with hdmlp-pack, one epoch of 224 x 224 batches. Usage: test_image_example.sh
# HDMLP_PACK EXAMPLE PYTHON TMPDIR
set -euo pipefail
pack=$1 example=$2 python=$3
work=$(mktemp -d "$4/image-example.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$python" - "$work/src" <<'PY'
import os, sys
from PIL import Image, ImageDraw
root = sys.argv[1]
for i in range(40):
    d = os.path.join(root, "class-%d" % (i % 4))
    os.makedirs(d, exist_ok=True)
    w, h = 200 + 13 * i, 150 + 7 * i
    im = Image.new("RGB", (w, h), (i * 6, 255 - i * 6, 90))
    ImageDraw.Draw(im).ellipse((w // 5, h // 5, w - w // 4, h - h // 3), fill=(240, 40, i))
    im.save(os.path.join(d, "img-%02d.%s" % (i, "png" if i % 5 == 0 else "jpg")))
PY
"$pack" -o "$work/ds" "$work/src" >/dev/null
out=$("$example" "$work/ds")
echo "$out"
# 40 images, labels 0..3 ten times each: sum 60; none failed
echo "$out" | grep -q "^40 images in .* label sum 60; decoded 40, failed 0;" || {
    echo "test_image_example: unexpected output" >&2
    exit 1
}
