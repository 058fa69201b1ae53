"""Loader(tls=(ca_file, cert_file, key_file)): mutual TLS between ranks, with the committed
test certificates of tests/data/tls (127.0.0.1; see make.sh there)."""
import os
import pathlib
import threading

import pytest

import hdmlp
from conftest import SOURCE_DIR, epoch_sequences

MEM = "40%"
CERTS = pathlib.Path(SOURCE_DIR) / "tests" / "data" / "tls"
TLS = (CERTS / "ca.pem", str(CERTS / "rank.pem"), os.fspath(CERTS / "rank.key"))


def free_port():
    from hdmlp.torch import _bound_port  # below the ephemeral range, as hdmlp.torch picks
    with _bound_port("127.0.0.1") as s:
        return s.getsockname()[1]


def two_ranks(ds, tls, timeout=20):
    """Runs ranks 0 and 1 in threads; returns ({rank: epoch sequences}, [errors])."""
    peers = [f"127.0.0.1:{free_port()}" for _ in range(2)]
    out, errors = {}, []

    def rank(r):
        try:
            with hdmlp.Loader(ds, 32, MEM, seed=3, epochs=2, rank=r, world=2, peers=peers,
                              job_token=7, peer_timeout=timeout, tls=tls[r]) as ld:
                out[r] = epoch_sequences(ld, 2)
        except BaseException as e:  # reported by the caller
            errors.append((r, e))

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out, errors


def test_tls_two_ranks_deliver_what_plaintext_does(small_ds):
    ds = hdmlp.Dataset(small_ds.path)
    with_tls, errors = two_ranks(ds, (TLS, TLS))
    assert not errors, errors
    plain, errors = two_ranks(ds, (None, None))
    assert not errors, errors
    for e in range(2):
        a, b = with_tls[0][e], with_tls[1][e]
        assert sorted(a + b) == list(range(small_ds.n))
    assert with_tls == plain


def test_tls_rank_and_plaintext_rank_do_not_talk(small_ds):
    ds = hdmlp.Dataset(small_ds.path)
    out, errors = two_ranks(ds, (TLS, None), timeout=1)
    assert sorted(r for r, _ in errors) == [0, 1], errors
    for r, e in errors:
        assert isinstance(e, hdmlp.PeerError), (r, e)
        assert f"rank {1 - r} " in str(e), (r, e)


def test_tls_argument_errors(small_ds):
    ds = hdmlp.Dataset(small_ds.path)
    peers = [f"127.0.0.1:{free_port()}" for _ in range(2)]
    kw = dict(rank=0, world=2, peers=peers, peer_timeout=1)
    for bad in ("ca.pem", (TLS[0], TLS[1]), (TLS[0], TLS[1], TLS[2], TLS[2]), 5):
        with pytest.raises(TypeError, match="tls"):
            hdmlp.Loader(ds, 32, MEM, tls=bad, **kw)
    with pytest.raises(TypeError):
        hdmlp.Loader(ds, 32, MEM, tls=(TLS[0], TLS[1], None), **kw)
    with pytest.raises(ValueError, match="key_file"):
        hdmlp.Loader(ds, 32, MEM, tls=(TLS[0], TLS[1], ""), **kw)
    missing = CERTS / "no-such.key"
    with pytest.raises(hdmlp.StorageError, match="no-such.key"):
        hdmlp.Loader(ds, 32, MEM, tls=(TLS[0], TLS[1], missing), **kw)
    # One rank: there is no exchange, so the files are not read.
    with hdmlp.Loader(ds, 32, MEM, epochs=1, tls=("/nonexistent",) * 3) as ld:
        assert sum(len(b) for b in ld) == small_ds.n
