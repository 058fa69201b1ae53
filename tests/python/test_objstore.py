"""Datasets in object storage from Python and the command lines: hdmlp.Dataset("s3://..."),
hdmlp.Loader over it, hdmlp-bench s3://... and hdmlp-pack --info/--verify URL, against
tests/objstore/objstore_server.py on 127.0.0.1 (an S3 store that checks every SigV4
signature). The same order as the local dataset for a seed; the bytes as packed."""
import os
import shutil
import subprocess
import sys

import pytest

import hdmlp
from conftest import SOURCE_DIR, epoch_sequences, tool

KEY, SECRET = "pykey", "py/secret"


@pytest.fixture(scope="module")
def s3(tmp_root, small_ds):
    root = os.path.join(tmp_root, "s3root")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.join(root, "bucket"))
    shutil.copytree(small_ds.path, os.path.join(root, "bucket", "small"))
    script = os.path.join(SOURCE_DIR, "tests", "objstore", "objstore_server.py")
    proc = subprocess.Popen([sys.executable, script, "--root", root, "--s3", "--access-key",
                             KEY, "--secret-key", SECRET], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("PORT "):
        proc.kill()
        pytest.skip("objstore_server.py did not start")
    env = {"AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET,
           "AWS_ENDPOINT_URL": f"http://127.0.0.1:{int(line.split()[1])}",
           "AWS_REGION": "us-east-1", "AWS_PROFILE": "", "AWS_SESSION_TOKEN": ""}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield env
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    proc.terminate()
    proc.wait(10)


def test_dataset_and_loader_over_s3(s3, small_ds):
    ds = hdmlp.Dataset("s3://bucket/small")
    local = hdmlp.Dataset(small_ds.path)
    assert len(ds) == len(local) == small_ds.n
    for i in (0, 1, 17, small_ds.n - 1):
        assert bytes(ds[i]) == bytes(local[i])
    kw = dict(batch_size=32, memory=small_ds.raw_bytes // 4, seed=5, epochs=2)
    remote_seq = epoch_sequences(hdmlp.Loader(ds, **kw), 2)
    local_seq = epoch_sequences(hdmlp.Loader(local, **kw), 2)
    assert remote_seq == local_seq
    for seq in remote_seq:
        assert sorted(seq) == list(range(small_ds.n))


def test_wrong_secret_names_the_error(s3, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    with pytest.raises(hdmlp.Error, match="SignatureDoesNotMatch"):
        hdmlp.Dataset("s3://bucket/small")


def test_cli_over_s3(s3, small_ds, tmp_root):
    bench = tool("hdmlp-bench")
    pack = tool("hdmlp-pack")
    ids = {}
    for name, path in (("remote", "s3://bucket/small"), ("local", small_ds.path)):
        out = os.path.join(tmp_root, f"ids-{name}")
        res = subprocess.run([bench, path, "--memory", "25%", "--seed", "9", "--threads", "4",
                              "--ids", out], capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        with open(out) as f:
            ids[name] = f.read()
    assert ids["remote"] == ids["local"] and ids["local"]
    res = subprocess.run([pack, "--info", "s3://bucket/small"], capture_output=True, text=True)
    assert res.returncode == 0 and f"samples       {small_ds.n}" in res.stdout, res.stderr
    res = subprocess.run([pack, "--verify", "s3://bucket/small"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    res = subprocess.run([pack, "--info", "s3://bucket/missing"], capture_output=True,
                         text=True)
    assert res.returncode != 0 and "bucket/missing/index" in res.stderr


def test_pack_to_s3_and_upload(s3, small_ds, tmp_root):
    pack = tool("hdmlp-pack")
    src = os.path.join(tmp_root, "small-src")
    res = subprocess.run([pack, "--quiet", "-o", "s3://bucket/repacked", "--chunk-size", "16",
                          "--seed", "11", "--segment-size", "64K", src],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    res = subprocess.run([pack, "--upload", small_ds.path, "-o", "s3://bucket/uploaded"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    local = hdmlp.Dataset(small_ds.path)
    for url in ("s3://bucket/repacked", "s3://bucket/uploaded"):
        ds = hdmlp.Dataset(url)
        assert len(ds) == len(local)
        for i in (0, 5, len(ds) - 1):
            assert bytes(ds[i]) == bytes(local[i])
    res = subprocess.run([pack, "--upload", small_ds.path, "-o", "http://127.0.0.1:1/x"],
                         capture_output=True, text=True)
    assert res.returncode == 2 and "s3://" in res.stderr


def test_fields_over_s3(s3, tmp_root):
    """Samples with fields from object storage: the same field records, batch for batch,
    as the local copy of the dataset."""
    mkds = os.environ.get("HDMLP_MKDS_FIELDS")
    if not mkds:
        pytest.skip("HDMLP_MKDS_FIELDS not set (run through ctest)")
    local = os.path.join(tmp_root, "s3root", "bucket", "fields")
    shutil.rmtree(local, ignore_errors=True)
    subprocess.run([mkds, local, "400", "16", "7"], check=True)
    remote, here = hdmlp.Dataset("s3://bucket/fields"), hdmlp.Dataset(local)
    assert remote.field_records and remote.fields == here.fields
    for i in range(0, 400, 37):
        assert bytes(remote[i]) == bytes(here[i])
    kw = dict(batch_size=16, memory=1 << 20, seed=3, epochs=1)
    got = [[bytes(s) for s in b.samples] for b in hdmlp.Loader(remote, **kw)]
    want = [[bytes(s) for s in b.samples] for b in hdmlp.Loader(here, **kw)]
    assert got == want and sum(map(len, got)) == 400
    for batch in got:
        for s in batch:
            assert set(hdmlp.sample_fields(s, remote.fields)) == {"data", "label", "caption",
                                                                  "score"}
