"""hdmlp.pack() and `python -m hdmlp`: the packer from Python (issue 25, item 2).

pack() runs the package's hdmlp-pack with its keywords as options: the same inputs, options
and seed give the CLI's bytes; a refused call raises the hdmlp error class for it with the
CLI's own message; a progress bar appears when stderr is a terminal and only then; Ctrl-C
stops the tool, which leaves nothing behind, and raises KeyboardInterrupt."""
import filecmp
import os
import pty
import select
import signal
import subprocess
import sys
import time

import pytest

import hdmlp
from conftest import tool, write_tree

FILES = 240
EPOCH = "1700000000"  # SOURCE_DATE_EPOCH: byte-identical output for the same inputs


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("pack-api")
    src = root / "src"
    files = write_tree(str(src), FILES, lambda r, i: r.randint(1, 2000))
    return root, src, files


def same_tree(a, b):
    assert sorted(os.listdir(a)) == sorted(os.listdir(b))
    _, mismatch, errors = filecmp.cmpfiles(a, b, os.listdir(a), shallow=False)
    assert not mismatch and not errors, (mismatch, errors)


def cli(*args, env=None):
    return subprocess.run([tool("hdmlp-pack"), *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_pack_gives_the_cli_dataset(tree, monkeypatch, capsys):
    root, src, files = tree
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    opts = ["--chunk-size", "7", "--seed", "99", "--compress", "zstd:5", "--segment-size",
            "64K", "-j", "2"]
    res = cli("-q", "-o", str(root / "cli.hdmlp"), *opts, str(src))
    assert res.returncode == 0, res.stderr
    out = hdmlp.pack(src, root / "py.hdmlp", chunk_size=7, seed=99, compress="zstd:5",
                     segment_size="64K", threads=2)
    assert out == str(root / "py.hdmlp")
    summary = capsys.readouterr().out
    assert f"Packed {FILES} samples" in summary and "Seed 99." in summary
    same_tree(root / "cli.hdmlp", root / "py.hdmlp")
    res = cli("--verify", out)
    assert res.returncode == 0 and res.stdout.strip() == "OK", res.stdout + res.stderr
    ds = hdmlp.Dataset(out)
    assert (len(ds), ds.chunk_size, ds.seed) == (FILES, 7, 99)
    assert sorted(ds[i] for i in range(len(ds))) == sorted(files.values())
    # quiet: no summary; force replaces; a list of inputs and a list file merge.
    lst = root / "extra.list"
    lst.write_text(f"{src / next(iter(files))}\tlisted\n")
    hdmlp.pack([src], out, lists=lst, seed=1, force=True, quiet=True)
    assert capsys.readouterr().out == ""
    ds = hdmlp.Dataset(out)
    assert len(ds) == FILES + 1 and "listed" in ds.classes


@pytest.mark.parametrize("kwargs,cli_args,cls", [
    ({"chunk_size": 0}, ["--chunk-size", "0"], hdmlp.InvalidArgumentError),
    ({"compress": "lz4"}, ["--compress", "lz4"], hdmlp.InvalidArgumentError),
    ({"image_quality": 50}, ["--image-quality", "50"], hdmlp.InvalidArgumentError),
    ({"dict": True, "compress": "none"}, ["--dict", "--compress", "none"],
     hdmlp.InvalidArgumentError),
    ({"no_such_option": 3}, ["--no-such-option", "3"], hdmlp.InvalidArgumentError),
], ids=["chunk_size", "compress", "image_quality", "dict", "unknown"])
def test_refused_options_raise_the_cli_message(tree, kwargs, cli_args, cls):
    root, src, _ = tree
    out = str(root / "refused.hdmlp")
    res = cli(*cli_args, "-o", out, str(src))
    assert res.returncode == 2
    message = res.stderr.splitlines()[0]
    with pytest.raises(cls) as info:
        hdmlp.pack(src, out, **kwargs)
    assert isinstance(info.value, ValueError)
    assert str(info.value) == message
    assert info.value.exit_status == 2 and info.value.name == "HDMLP_E_INVAL"
    assert not os.path.exists(out)


def test_failures_raise_the_cli_message(tree):
    root, src, _ = tree
    missing = str(root / "no-such-input")
    res = cli("-o", str(root / "x.hdmlp"), missing)
    assert res.returncode == 1
    with pytest.raises(hdmlp.NotFoundError) as info:
        hdmlp.pack(missing, root / "x.hdmlp")
    assert isinstance(info.value, FileNotFoundError)
    assert res.stderr.strip() in str(info.value) and missing in info.value.detail

    existing = root / "exists.hdmlp"
    existing.mkdir()
    (existing / "keep").write_text("not a dataset")
    res = cli("-q", "-o", str(existing), str(src))
    assert res.returncode == 1
    with pytest.raises(hdmlp.ExistsError) as info:
        hdmlp.pack(src, existing, quiet=True)
    assert isinstance(info.value, FileExistsError)
    assert res.stderr.strip() in str(info.value)
    assert (existing / "keep").read_text() == "not a dataset"

    with pytest.raises(hdmlp.InvalidArgumentError, match="chunk_size"):
        hdmlp.pack(src, root / "y.hdmlp", chunk_size=True)
    with pytest.raises(hdmlp.InvalidArgumentError, match="inputs"):
        hdmlp.pack(42, root / "y.hdmlp")


def test_tool_not_found_is_an_error(monkeypatch):
    mod = sys.modules["hdmlp.pack"]  # the module; hdmlp.pack is the function
    monkeypatch.setattr(mod, "_recorded", lambda: {})
    monkeypatch.delenv("HDMLP_PACK", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(hdmlp.NotFoundError, match="hdmlp-pack not found.*HDMLP_PACK"):
        hdmlp.pack("in", "out")


def run_in_pty(code, args):
    """Runs python -c code with stderr on a pseudo-terminal; returns (exit, stderr bytes)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stderr=slave,
                            stdout=subprocess.DEVNULL)
    os.close(slave)
    data = b""
    while True:
        r, _, _ = select.select([master], [], [], 60)
        if not r:
            proc.kill()
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    os.close(master)
    return proc.wait(timeout=60), data


PACK_CODE = ("import sys, hdmlp\n"
             "hdmlp.pack(sys.argv[1], sys.argv[2], force=True, quiet=sys.argv[3] == '1')\n")


def test_progress_bar_on_a_terminal_only(tree):
    root, src, _ = tree
    status, err = run_in_pty(PACK_CODE, [str(src), str(root / "bar.hdmlp"), "0"])
    assert status == 0, err
    assert b"\x1b[K" in err and b"\r" in err, err  # the tool's bar, redrawn in place
    status, err = run_in_pty(PACK_CODE, [str(src), str(root / "bar.hdmlp"), "1"])
    assert status == 0 and err == b"", err  # quiet: nothing
    res = subprocess.run([sys.executable, "-c", PACK_CODE, str(src), str(root / "bar.hdmlp"),
                          "0"], capture_output=True, timeout=60)
    assert res.returncode == 0 and b"\x1b[K" not in res.stderr, res.stderr


def test_ctrl_c_stops_the_tool_and_leaves_nothing(tmp_path):
    src = tmp_path / "big"
    (src / "c").mkdir(parents=True)
    rnd = os.urandom(1 << 16)
    for i in range(400):  # 25 MiB that zstd -19 on one thread takes seconds over
        (src / "c" / f"{i:04d}").write_bytes(rnd[i:] + rnd[:i])
    out = tmp_path / "out.hdmlp"
    code = ("import sys, hdmlp\n"
            "try:\n"
            "    hdmlp.pack(sys.argv[1], sys.argv[2], compress='zstd:19', threads=1,\n"
            "               quiet=True)\n"
            "except KeyboardInterrupt:\n"
            "    print('KeyboardInterrupt')\n")
    # Its own process group, signalled as a terminal's Ctrl-C signals one.
    proc = subprocess.Popen([sys.executable, "-c", code, str(src), str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 30
    while not any(n.startswith(".out.hdmlp.tmp") for n in os.listdir(tmp_path)):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert stdout.strip() == "KeyboardInterrupt", stdout + stderr
    assert sorted(os.listdir(tmp_path)) == ["big"]


def test_python_m_hdmlp(tree):
    root, src, _ = tree
    out = str(root / "m.hdmlp")
    run = [sys.executable, "-m", "hdmlp"]
    res = subprocess.run(run + ["pack", "-q", "-f", "-o", out, str(src)], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    res = subprocess.run(run + ["pack", "--verify", out], capture_output=True, text=True,
                         timeout=60)
    assert (res.returncode, res.stdout) == (0, "OK\n"), res.stderr
    res = subprocess.run(run + ["bench", out, "--memory", "1M", "--epochs", "1"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and f"{FILES}" in res.stdout, res.stdout + res.stderr
    res = subprocess.run(run + ["where"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "hdmlp-pack: /" in res.stdout, res.stdout + res.stderr
    res = subprocess.run(run + ["frobnicate"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "unknown command" in res.stderr
