#!/usr/bin/env bash
# The main job end to end: install dependencies, build, turn Fashion-MNIST (Debian's
# dataset-fashion-mnist) into a folder of 60,000 PNG files, pack it, verify it, iterate it
# in random order within a memory budget of 25 % of the dataset from C and from PyTorch
# (printing throughput), and train a small CNN through hdmlp.torch and through torchvision
# side by side.   Usage: bash examples/quickstart.sh
set -euo pipefail
cd "$(dirname "$0")/.."

bash .ci/deps.sh
echo "== build"
cmake -S . -B build -DPython3_EXECUTABLE=/usr/bin/python3 >/dev/null
cmake --build build -j"$(nproc)" >/dev/null

work=build/quickstart
rm -rf "$work"
mkdir -p "$work"
echo "== dataset: Fashion-MNIST as an ImageFolder tree of PNG files"
/usr/bin/python3 tests/data/make_fashion_mnist.py "$work/fashion-mnist"

echo "== pack"
build/packer/hdmlp-pack --seed 1 -o "$work/train.hdmlp" "$work/fashion-mnist/train"
echo "== info"
build/packer/hdmlp-pack --info "$work/train.hdmlp"
echo "== verify"
build/packer/hdmlp-pack --verify "$work/train.hdmlp"

echo "== iterate from C (examples/iterate.c: one epoch, 256 MiB budget)"
build/examples/hdmlp_example_iterate "$work/train.hdmlp"
echo "== iterate with hdmlp-bench (3 epochs, memory budget 25 % of the dataset)"
build/loader/hdmlp-bench "$work/train.hdmlp" --memory 25% --epochs 3 --batch 64

echo "== iterate from PyTorch (examples/iterate_torch.py: hdmlp.torch + DataLoader, 2 workers)"
PYTHONPATH=build/python /usr/bin/python3 examples/iterate_torch.py "$work/train.hdmlp" 2

echo "== train a small CNN: hdmlp.torch vs torchvision's ImageFolder pipeline (1 epoch)"
PYTHONPATH=build/python /usr/bin/python3 examples/train_fashion_mnist.py --epochs 1 \
    --limit-train 20000 --limit-test 5000 --workdir "$work/train-example" \
    --hdmlp-pack build/packer/hdmlp-pack
