"""The multi-process kernel gives bit-identical results to the single-core one, and fails loudly
when a worker dies."""

import os
import secrets
import signal

import gmpy2
import numpy as np
import pytest

import shaper.kernels as kernels
from shaper.errors import KernelError
from shaper.kernels import FixedBaseSpec, int_to_exponent_bytes, wire
from shaper.kernels.gmp import local_kernel
from shaper.kernels.parallel import _POOL, ParallelKernel


@pytest.fixture(scope="module")
def par():
    return ParallelKernel(2, min_us=0.0)  # always go to the workers


M = int(gmpy2.next_prime(secrets.randbits(1024) | (1 << 1023)))  # prime: every value is a unit


def test_every_method_matches_the_local_kernel(par):
    local = local_kernel()
    bases = [secrets.randbelow(M) for _ in range(13)]
    exps = [secrets.randbits(64) for _ in range(13)]
    assert par.powmod(bases, exps, M) == local.powmod(bases, exps, M)
    assert par.powmod_same_exponent(bases, 2**100 + 1, M) == local.powmod_same_exponent(bases, 2**100 + 1, M)
    assert par.invert(bases, M) == local.invert(bases, M)
    spec = FixedBaseSpec(7, M, 256)
    e = int_to_exponent_bytes([secrets.randbits(256) for _ in range(13)], width=32)
    assert par.fixed_base_powmod([spec], [e], bases, M) == local.fixed_base_powmod([spec], [e], bases, M)
    indices = np.array([secrets.randbelow(13) for _ in range(40)])
    indptr = np.array([0, 5, 5, 17, 30, 40])
    assert par.prod_rows(bases, indices, indptr, M) == local.prod_rows(bases, indices, indptr, M)
    cols = [bases, bases[::-1], bases]
    assert par.horner(cols, 70, M) == local.horner(cols, 70, M)
    multi_b = [[bases[:5], bases[5:10]], [bases[3:8], bases[8:13]]]
    multi_e = [[[3, 5, 7, 9, 11], [2, 4, 6, 8, 10]], [[1, 1, 1, 1, 1], [2**60, 0, 5, 6, 7]]]
    assert par.horner_multiexp(multi_b, multi_e, 70, M) == local.horner_multiexp(multi_b, multi_e, 70, M)
    calls = [("powmod_same_exponent", (bases, 3, M)), ("invert", (bases, M))]
    assert par.gather(calls) == local.gather(calls)


def test_worker_errors_keep_their_type(par):
    with pytest.raises(ZeroDivisionError, match="index 6"):
        par.invert([2, 4, 7, 8, 11, 13, 10, 1], 15)  # index relative to the whole batch


def test_multicore_paillier_matches_single_core(paillier_keys, monkeypatch):
    pk, sk = paillier_keys
    values = list(range(-20, 20))
    width = (pk.exponent_bits + 7) // 8
    exps = np.frombuffer(bytes((i * 7) % 256 for i in range(len(values) * width)), dtype=np.uint8).reshape(len(values), width)
    results = {}
    for workers in (1, 2):
        kernels.set_workers(workers)
        monkeypatch.setattr("shaper.kernels.parallel.PARALLEL_MIN_US", 0.0)
        if workers == 2:
            monkeypatch.setattr(kernels, "_kernel", ParallelKernel(2, min_us=0.0))
        cts = pk.raw_encrypt(values, exps)
        enc = pk.ciphertext_array(cts)
        results[workers] = (
            cts,
            sk.decrypt(enc).tolist(),
            (enc * np.arange(40)).ciphertexts.tolist(),
            sk.raw_encrypt(values, exps),
        )
    kernels.set_workers(None)
    assert results[1] == results[2]
    assert results[1][1] == values


def test_dead_worker_raises_then_recovers(par, monkeypatch):
    par.powmod([2, 3], [3, 3], M)  # make sure workers exist
    victim = _POOL._workers[0]
    os.kill(victim.proc.pid, signal.SIGKILL)
    victim.proc.wait()
    # A worker found dead before a call is replaced silently ...
    assert par.powmod([2, 3], [10, 10], M) == [pow(2, 10, M), pow(3, 10, M)]
    # ... one that dies during a call makes the call fail loudly.
    victim = _POOL._workers[0]
    os.kill(victim.proc.pid, signal.SIGKILL)
    victim.proc.wait()
    with monkeypatch.context() as m:
        m.setattr("shaper.kernels.parallel._Worker.alive", lambda self: True)
        with pytest.raises(KernelError, match="worker process died"):
            par.powmod(list(range(2, 10)), [5] * 8, M)
    assert par.powmod([2, 3], [10, 10], M) == [pow(2, 10, M), pow(3, 10, M)]


def test_wire_codec_roundtrip_and_refusals():
    spec = FixedBaseSpec(3, M, 99)
    obj = ("fixed_base_powmod", ([spec], [np.arange(6, dtype=np.uint8).reshape(2, 3)], [1, 2**300], M, None))
    back = wire.decode(wire.encode(obj))
    assert back[0] == "fixed_base_powmod"
    assert back[1][0][0] == spec and back[1][3] == M and back[1][4] is None
    np.testing.assert_array_equal(back[1][1][0], obj[1][1][0])
    assert back[1][2] == [1, 2**300]
    with pytest.raises(wire.WireError):
        wire.encode([-1])
    with pytest.raises(wire.WireError):
        wire.encode(np.zeros(2, dtype=np.float64))
    with pytest.raises(wire.WireError):
        wire.encode({"a": 1})
    with pytest.raises(wire.WireError):
        wire.decode(b"Zjunk")
    with pytest.raises(wire.WireError):
        wire.decode(wire.encode([1, 2])[:-1])


def test_set_workers_validation(monkeypatch):
    with pytest.raises(ValueError):
        kernels.set_workers(0)
    monkeypatch.setenv("SHAPER_NATIVE", "off")
    kernels.set_workers(1)
    assert kernels.workers() == 1 and kernels.get_kernel() is local_kernel()
    kernels.set_workers(2)
    assert isinstance(kernels.get_kernel(), kernels.ParallelKernel)
    kernels.set_workers(None)


def test_set_workers_caps_numpys_blas_threads():
    """A party given one worker must not keep a BLAS pool as wide as the machine (it spins
    against the other parties on their cores)."""
    from threadpoolctl import threadpool_info

    def blas() -> list[int]:
        return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]

    import numpy as np

    np.ones((2, 2)) @ np.ones((2, 2))  # BLAS loaded
    if not blas():
        pytest.skip("numpy here has no BLAS threadpoolctl can see")
    try:
        kernels.set_workers(1)
        assert blas() and all(n == 1 for n in blas())
    finally:
        kernels.set_workers(None)
    assert all(1 <= n <= kernels.workers() for n in blas())


def test_interrupted_call_never_leaks_stale_replies(par, monkeypatch):
    bases = list(range(2, 50))
    par.powmod(bases, [7] * len(bases), M)  # workers up
    real_decode = wire.decode
    calls = {"n": 0}

    def flaky(data):
        calls["n"] += 1
        if calls["n"] == 1:
            raise KeyboardInterrupt
        return real_decode(data)

    monkeypatch.setattr(wire, "decode", flaky)
    with pytest.raises(KeyboardInterrupt):
        par.powmod(bases, [7] * len(bases), M)
    monkeypatch.setattr(wire, "decode", real_decode)
    other = list(range(100, 148))
    assert par.powmod(other, [3] * len(other), M) == [pow(b, 3, M) for b in other]


def test_arguments_the_wire_cannot_carry_fall_back_to_local(par):
    bases = [-3, -5, 7, 11] * 4
    assert par.powmod(bases, [5] * len(bases), M) == local_kernel().powmod(bases, [5] * len(bases), M)
