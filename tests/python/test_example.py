"""examples/train_fashion_mnist.py in a short form: one epoch on a subset, both pipelines
well above chance (0.1)."""
import json
import os
import subprocess
import sys

import pytest

from conftest import SOURCE_DIR, tool

FMNIST = "/usr/share/datasets/fashion-mnist"


def test_train_fashion_mnist_short(tmp_root):
    pytest.importorskip("torchvision")
    pytest.importorskip("PIL")
    if not os.path.isfile(os.path.join(FMNIST, "train-images-idx3-ubyte.gz")):
        pytest.skip("dataset-fashion-mnist not installed")
    cmd = [sys.executable, os.path.join(SOURCE_DIR, "examples", "train_fashion_mnist.py"),
           "--limit-train", "3000", "--limit-test", "1000", "--epochs", "1",
           "--batch-size", "32", "--memory", "1M", "--workers", "1", "--json",
           "--workdir", os.path.join(tmp_root, "fmnist"), "--hdmlp-pack", tool("hdmlp-pack")]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stdout + res.stderr
    print(res.stdout)
    results = json.loads(res.stdout.strip().splitlines()[-1])
    assert set(results) == {"hdmlp", "torchvision"}
    for name, r in results.items():
        assert r["accuracy"] > 0.5, f"{name}: accuracy {r['accuracy']}"


def test_train_image_text_short(tmp_root):
    """examples/train_image_text.py in a short form: samples with fields (image, caption,
    box ndarray, JSON, label) from a JSONL manifest through hdmlp.torch with 2 workers and a
    collate_fields hook; the captions alone teach the model well above chance (0.1)."""
    pytest.importorskip("PIL")
    pytest.importorskip("numpy")
    if not os.path.isfile(os.path.join(FMNIST, "train-images-idx3-ubyte.gz")):
        pytest.skip("dataset-fashion-mnist not installed")
    cmd = [sys.executable, os.path.join(SOURCE_DIR, "examples", "train_image_text.py"),
           "--limit-train", "4000", "--limit-test", "1000", "--epochs", "2", "--json",
           "--workdir", os.path.join(tmp_root, "image_text"),
           "--hdmlp-pack", tool("hdmlp-pack")]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stdout + res.stderr
    print(res.stdout)
    r = json.loads(res.stdout.strip().splitlines()[-1])
    assert r["fields"] == {"box": "ndarray", "caption": "text", "image": "image",
                           "label": "int64", "meta": "json"}
    assert r["train_samples"] == 4000 // 256 * 256 and r["test_samples"] == 1000
    assert r["zero_shot_accuracy"] > 0.2, r
    assert r["box_iou"] > 0.5, r
