"""Error codes → the exception hierarchy, with useful messages."""
import os
import shutil

import pytest

import hdmlp

MEM = "40%"


def test_hierarchy():
    assert issubclass(hdmlp.CorruptDataError, hdmlp.Error)
    assert issubclass(hdmlp.FormatVersionError, hdmlp.Error)
    assert issubclass(hdmlp.StorageError, hdmlp.Error)
    assert issubclass(hdmlp.StorageError, OSError)
    assert issubclass(hdmlp.NotFoundError, hdmlp.StorageError)
    assert issubclass(hdmlp.NotFoundError, FileNotFoundError)
    assert issubclass(hdmlp.ExistsError, FileExistsError)
    assert issubclass(hdmlp.PeerError, ConnectionError)
    assert issubclass(hdmlp.InvalidArgumentError, hdmlp.Error)
    assert issubclass(hdmlp.InvalidArgumentError, ValueError)
    assert issubclass(hdmlp.OutOfMemoryError, MemoryError)
    assert issubclass(hdmlp.UnsupportedError, NotImplementedError)
    assert issubclass(hdmlp.StateError, RuntimeError)
    assert issubclass(hdmlp.TimedOutError, TimeoutError)
    assert issubclass(hdmlp.Interrupted, InterruptedError)
    assert not issubclass(hdmlp.CorruptDataError, OSError)
    assert issubclass(hdmlp.Error, Exception)


def test_codes_and_messages():
    assert hdmlp.E_CORRUPT == -4 and hdmlp.OK == 0 and hdmlp.END == 1
    assert hdmlp.strerror(hdmlp.E_CORRUPT) == "corrupt data"
    assert hdmlp.err_name(hdmlp.E_IO) == "HDMLP_E_IO"


def test_bad_path(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(hdmlp.NotFoundError) as ei:
        hdmlp.Dataset(missing)
    e = ei.value
    assert isinstance(e, FileNotFoundError) and isinstance(e, hdmlp.Error)
    assert e.code == hdmlp.E_NOTFOUND and e.name == "HDMLP_E_NOTFOUND"
    assert e.errno == 2
    assert "nope" in str(e) and e.detail
    not_a_dataset = tmp_path / "empty"
    not_a_dataset.mkdir()
    with pytest.raises(hdmlp.Error) as ei:
        hdmlp.Dataset(not_a_dataset)
    assert "empty" in str(ei.value)
    with pytest.raises(TypeError):
        hdmlp.Dataset(42)


def corrupt_copy(src, dst):
    shutil.copytree(src, dst)
    for name in os.listdir(dst):
        if name.startswith("segment"):
            path = os.path.join(dst, name)
            size = os.path.getsize(path)
            with open(path, "r+b") as f:
                f.write(b"\xa5" * size)
    return str(dst)


def test_corrupt_chunk(small_ds, tmp_path):
    bad = corrupt_copy(small_ds.path, tmp_path / "bad")
    ds = hdmlp.Dataset(bad)  # the index is intact
    with pytest.raises(hdmlp.CorruptDataError) as ei:
        ds[0]
    assert ei.value.code == hdmlp.E_CORRUPT and "sample" in str(ei.value)
    with pytest.raises(hdmlp.CorruptDataError):
        ds.verify()
    ld = hdmlp.Loader(ds, 32, MEM, seed=1)
    with pytest.raises(hdmlp.CorruptDataError) as ei:
        for _ in ld:
            pass
    assert "chunk" in str(ei.value) or "sample" in str(ei.value)
    with pytest.raises(hdmlp.CorruptDataError):  # errors are sticky
        ld.next_batch()


@pytest.mark.parametrize("kwargs, param", [
    (dict(batch_size=0), "batch_size"),
    (dict(batch_size=-1), "batch_size"),
    (dict(batch_size=2 ** 40), "batch_size"),
    (dict(memory=100), "memory"),
    (dict(memory="lots"), "memory"),
    (dict(threads=0), "threads"),
    (dict(threads=1000), "threads"),
    (dict(epochs=0), "epochs"),
    (dict(rank=2, world=2), "rank"),
    (dict(refill="sometimes"), "refill"),
    (dict(policy="lru"), "policy"),
    (dict(engine="aio"), "engine"),
    (dict(same_host="pipe"), "same_host"),
    (dict(storage_cost=(-1.0, 1e9)), "storage_cost"),
])
def test_bad_arguments_name_the_parameter(small_ds, kwargs, param):
    args = dict(batch_size=32, memory=MEM)
    args.update(kwargs)
    with pytest.raises(hdmlp.InvalidArgumentError) as ei:
        hdmlp.Loader(small_ds.path, args.pop("batch_size"), args.pop("memory"), **args)
    assert isinstance(ei.value, ValueError)
    assert param in str(ei.value) or param.split("_")[0] in str(ei.value), str(ei.value)


@pytest.mark.parametrize("value", [-1, 0, 2 ** 20 + 1, 2 ** 64])
def test_out_of_range_messages_state_the_valid_range(small_ds, value):
    # batch_size=-1 used to say "expected 0..2**64-1", though 0 is refused too
    with pytest.raises(hdmlp.InvalidArgumentError,
                       match=rf"batch_size: expected an int in 1\.\.1048576, got {value}$"):
        hdmlp.Loader(small_ds.path, value, MEM)
    threads = 65 if value == 2 ** 20 + 1 else value
    with pytest.raises(hdmlp.InvalidArgumentError,
                       match=rf"threads: expected an int in 1\.\.64, got {threads}$"):
        hdmlp.Loader(small_ds.path, 32, MEM, threads=threads)
    if value <= 0:
        with pytest.raises(hdmlp.InvalidArgumentError, match=r"epochs: expected an int >= 1"):
            hdmlp.Loader(small_ds.path, 32, MEM, epochs=value)


def test_unknown_keyword_is_named_with_the_close_match(small_ds):
    # was "missing required argument 'batch_size'"
    with pytest.raises(TypeError, match=r"Loader\(\) got an unexpected keyword argument "
                                        r"'batchsize' \(did you mean 'batch_size'\?\)"):
        hdmlp.Loader(small_ds.path, batchsize=32, memory=MEM)
    with pytest.raises(TypeError, match=r"'polcy' \(did you mean 'policy'\?\)"):
        hdmlp.Loader(small_ds.path, 32, MEM, polcy="random")
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'zzz'$"):
        hdmlp.Loader(small_ds.path, 32, MEM, zzz=1)


@pytest.mark.parametrize("kwargs", [
    dict(batch_size="32"), dict(batch_size=3.0), dict(seed="1"), dict(seed=True),
    dict(refill=1), dict(memory=[1]), dict(same_host=1), dict(storage_cost="fast"),
    dict(storage_cost=(1.0,)),
])
def test_wrong_types_are_type_errors(small_ds, kwargs):
    args = dict(batch_size=32, memory=MEM)
    args.update(kwargs)
    with pytest.raises(TypeError):
        hdmlp.Loader(small_ds.path, args.pop("batch_size"), args.pop("memory"), **args)


def test_budget_too_small_names_the_minimum(small_ds):
    with pytest.raises(hdmlp.InvalidArgumentError, match="memory budget.*at least"):
        hdmlp.Loader(small_ds.path, 32, 8192)


def test_world_size_above_one_needs_peers(small_ds):
    with pytest.raises(hdmlp.InvalidArgumentError, match="peer"):
        hdmlp.Loader(small_ds.path, 32, MEM, rank=0, world=2)
    with pytest.raises(hdmlp.InvalidArgumentError, match="peers"):
        hdmlp.Loader(small_ds.path, 32, MEM, rank=0, world=2, peers=["nohost", "x:1"])
    with pytest.raises(TypeError, match="peers"):
        hdmlp.Loader(small_ds.path, 32, MEM, rank=0, world=2, peers="127.0.0.1:1")
    with pytest.raises(hdmlp.InvalidArgumentError, match="peer_timeout"):
        hdmlp.Loader(small_ds.path, 32, MEM, peer_timeout=0.01)
