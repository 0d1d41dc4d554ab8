"""The native (Rust) kernel against Python's built-in ``pow`` and the gmpy2 kernel, on every
engine this machine has: the portable 64-bit engine always, the AVX-512 IFMA engine where the
CPU supports it (CI machines may or may not; what is absent is reported as skipped, not
silently passed)."""

import os
import secrets
import signal
import threading

import numpy as np
import pytest

from shaper.kernels import FixedBaseSpec, int_to_exponent_bytes, native
from shaper.kernels.gmp import GmpKernel

if not native.available():  # pragma: no cover - the extension is part of every install
    pytest.skip("shaper._native is not built", allow_module_level=True)

from shaper import _native  # noqa: E402
from shaper.kernels.native import NativeKernel  # noqa: E402

ENGINES = ["portable", pytest.param("ifma", marks=pytest.mark.skipif(
    not native.ifma_available(), reason="this CPU lacks AVX-512 IFMA"))]


def _modulus(bits: int) -> int:
    return secrets.randbits(bits) | (1 << (bits - 1)) | 1


@pytest.fixture(params=ENGINES, scope="module")
def kernel(request):
    return NativeKernel(request.param)


# digit counts around every radix boundary the engines care about, up to 6144 bits (3072-bit keys)
SIZES = [64, 127, 512, 520, 1024, 1040, 1500, 2048, 3072, 4096, 6144]


@pytest.mark.parametrize("bits", SIZES)
def test_powmod_and_products_match_pow(kernel, bits):
    m = _modulus(bits)
    count = 13  # not a multiple of the 8 lanes
    xs = [secrets.randbelow(m) for _ in range(count)]
    xs[:4] = [0, 1, m - 1, 2]
    ys = [secrets.randbelow(m) for _ in range(count)]
    es = [secrets.randbits(secrets.randbelow(160) + 1) for _ in range(count)]
    es[:3] = [0, 1, (1 << 159) - 1]
    assert kernel.powmod(xs, es, m) == [pow(x, e, m) for x, e in zip(xs, es)]
    e = secrets.randbits(bits // 2) | 1
    assert kernel.powmod_same_exponent(xs, e, m) == [pow(x, e, m) for x in xs]
    assert kernel.powmod_same_exponent(xs, 0, m) == [1] * count
    assert kernel.mulmod(xs, ys, m) == [x * y % m for x, y in zip(xs, ys)]


@pytest.mark.parametrize("count", [1, 7, 8, 9, 17, 64])
def test_batch_sizes_and_unreduced_inputs(kernel, count):
    m = _modulus(1024)
    xs = [secrets.randbelow(m) for _ in range(count)]
    wide = [x + m * secrets.randbelow(1 << 900) for x in xs]  # values >= m are reduced first
    wide[0] = -xs[0]
    expect = [pow(x, 65537, m) for x in xs]
    expect[0] = pow(-xs[0], 65537, m)
    assert kernel.powmod_same_exponent(wide, 65537, m) == expect
    assert kernel.mulmod(wide, xs, m) == [a * b % m for a, b in zip(wide, xs)]


@pytest.mark.parametrize("bits", [256, 2048, 4096])
def test_fixed_base_matches_gmp_kernel(kernel, bits):
    m = _modulus(bits)
    g, h = secrets.randbelow(m - 2) + 2, secrets.randbelow(m - 2) + 2
    count = 11
    for exp_bits in (1, 63, 300):
        e1 = [secrets.randbits(exp_bits) for _ in range(count)]
        e2 = [secrets.randbits(exp_bits) for _ in range(count)]
        e1[0], e2[:2] = 0, [0, (1 << exp_bits) - 1]
        mult = [secrets.randbelow(m) for _ in range(count)]
        specs = [FixedBaseSpec(g, m, 300), FixedBaseSpec(h, m, 300)]
        exps = [int_to_exponent_bytes(e1), int_to_exponent_bytes(e2)]
        got = kernel.fixed_base_powmod(specs, exps, mult, m)
        assert got == GmpKernel().fixed_base_powmod(specs, exps, mult, m)
        assert got == [x * pow(g, a, m) * pow(h, b, m) % m for x, a, b in zip(mult, e1, e2)]
        assert kernel.fixed_base_powmod(specs[:1], exps[:1], None, m) == [pow(g, a, m) for a in e1]


@pytest.mark.parametrize("window", range(1, 9))
def test_comb_tables_of_every_window(window):
    """Every selection layout (8 entries by permute, 16..256 by permute and blend tree)."""
    m = _modulus(1100)
    engines = ["portable"] + (["ifma"] if native.ifma_available() else [])
    words = (m.bit_length() + 63) // 64
    base = secrets.randbelow(m)
    es = [secrets.randbits(70) for _ in range(19)]
    es[0] = (1 << 70) - 1
    for engine in engines:
        ctx = _native.Context(_rows([m], words)[0], engine)
        table = ctx.comb_table(_rows([base], words)[0], window, -(-70 // window))
        got = ctx.fixed_base([table], [_rows(es, 2)])
        assert _ints(got) == [pow(base, e, m) for e in es]


def test_fixed_base_table_grows_for_longer_exponents(kernel):
    m = _modulus(512)
    spec = FixedBaseSpec(5, m, 64)
    short = int_to_exponent_bytes([3, 2**63])
    assert kernel.fixed_base_powmod([spec], [short], None, m) == [pow(5, 3, m), pow(5, 2**63, m)]
    long = int_to_exponent_bytes([2**200 + 7])
    assert kernel.fixed_base_powmod([spec], [long], None, m) == [pow(5, 2**200 + 7, m)]


@pytest.mark.parametrize("bits", [512, 4096])
def test_prod_rows_matches_loops(kernel, bits):
    m = _modulus(bits)
    values = [secrets.randbelow(m) for _ in range(200)]
    lengths = [0, 1, 2, 5, 64, 65, 130, 3, 0, 1000] + [secrets.randbelow(20) for _ in range(20)]
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    indices = np.array([secrets.randbelow(200) for _ in range(int(indptr[-1]))], dtype=np.int64)
    got = kernel.prod_rows(values, indices, indptr, m)
    assert got == GmpKernel().prod_rows(values, indices, indptr, m)
    assert kernel.prod_rows(values, np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64), m) == []


def test_prod_rows_rejects_bad_structure(kernel):
    m = _modulus(256)
    values = [3, 5, 7]
    with pytest.raises(ValueError, match="outside"):
        kernel.prod_rows(values, np.array([0, 3]), np.array([0, 2]), m)
    with pytest.raises(ValueError, match="non-decreasing"):
        kernel.prod_rows(values, np.array([0, 1]), np.array([0, 2, 1]), m)


@pytest.mark.parametrize("bits", [700, 2048])
def test_horner_and_multiexp_match_gmp_kernel(kernel, bits):
    m = _modulus(bits)
    k, groups, shift = 4, 9, 90
    cols = [[secrets.randbelow(m) for _ in range(groups)] for _ in range(k)]
    ref = GmpKernel()
    assert kernel.horner(cols, shift, m) == ref.horner(cols, shift, m)
    for T in (1, 2, 3):
        bases = [[[secrets.randbelow(m) for _ in range(groups)] for _ in range(k)] for _ in range(T)]
        exps = [[[secrets.randbits(secrets.randbelow(shift) + 1) for _ in range(groups)] for _ in range(k)]
                for _ in range(T)]
        exps[0][0][0] = 0
        assert kernel.horner_multiexp(bases, exps, shift, m) == ref.horner_multiexp(bases, exps, shift, m)
    too_long = [[[1 << shift] * groups for _ in range(k)]]
    with pytest.raises(ValueError, match="slot shift"):
        kernel.horner_multiexp([cols], too_long, shift, m)


def test_errors_name_the_problem(kernel):
    with pytest.raises(ValueError, match="odd"):
        kernel.mulmod([1], [1], 2**64)
    with pytest.raises(ValueError, match="non-negative"):
        kernel.powmod([3], [-1], 101)
    with pytest.raises(ValueError, match="differ"):
        kernel.mulmod([1, 2], [1], 101)
    ctx = kernel.context(_modulus(128))
    with pytest.raises(ValueError, match="words"):
        ctx.mulmod(np.zeros((2, 3), dtype=np.uint64), np.zeros((2, 3), dtype=np.uint64))
    with pytest.raises(ValueError, match="not reduced"):
        ctx.mulmod(np.full((1, 2), 2**64 - 1, dtype=np.uint64), np.zeros((1, 2), dtype=np.uint64))
    with pytest.raises(ValueError, match="exceeds"):
        _native.Context(np.full(129, 2**64 - 1, dtype=np.uint64), "portable")
    with pytest.raises(ValueError, match="unknown engine"):
        _native.Context(np.array([101], dtype=np.uint64), "gpu")


def test_rejects_fortran_order_and_misaligned_arrays():
    m = _modulus(256)
    ctx = _native.Context(_rows([m], 4)[0], "portable")
    a = _rows([secrets.randbelow(m) for _ in range(5)], 4)
    with pytest.raises(ValueError, match="C-contiguous"):
        ctx.mulmod(np.asfortranarray(a), np.asfortranarray(a))
    raw = np.zeros(8 * 20 + 1, dtype=np.uint8)
    misaligned = raw[1:].view("<u8").reshape(5, 4)
    with pytest.raises(ValueError, match="aligned"):
        ctx.mulmod(misaligned, a)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_usable_in_a_forked_child(kernel):
    """The thread pool does not survive fork(); the child starts its own instead of hanging."""
    m = _modulus(1024)
    xs = [secrets.randbelow(m) for _ in range(16)]
    expect = [pow(x, 65537, m) for x in xs]
    assert kernel.powmod_same_exponent(xs, 65537, m) == expect
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        signal.alarm(60)
        os._exit(0 if kernel.powmod_same_exponent(xs, 65537, m) == expect else 3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_empty_batches(kernel):
    assert kernel.powmod([], [], 101) == []
    assert kernel.powmod_same_exponent([], 5, 101) == []
    assert kernel.mulmod([], [], 101) == []
    assert kernel.horner([], 8, 101) == []


def test_threads_release_the_gil_and_agree(kernel):
    """Kernels run with the GIL released: concurrent calls from Python threads overlap and give
    the same results as sequential ones."""
    m = _modulus(2048)
    xs = [secrets.randbelow(m) for _ in range(32)]
    e = secrets.randbits(512)
    expect = [pow(x, e, m) for x in xs]
    results = [None] * 4

    def work(i):
        results[i] = kernel.powmod_same_exponent(xs, e, m)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == expect for r in results)


def test_thread_pool_size():
    before = _native.threads()
    _native.set_threads(1)
    assert _native.threads() == 1
    with pytest.raises(ValueError):
        _native.set_threads(0)
    _native.set_threads(before)


def test_mode_selection(monkeypatch):
    import shaper.kernels as kernels

    monkeypatch.setenv("SHAPER_NATIVE", "off")
    assert native.chosen_engine() is None and kernels.get_kernel().name.startswith("gmpy2")
    monkeypatch.setenv("SHAPER_NATIVE", "portable")
    assert kernels.get_kernel().name == "native-portable"
    monkeypatch.setenv("SHAPER_NATIVE", "bogus")
    with pytest.raises(ValueError, match="SHAPER_NATIVE"):
        native.chosen_engine()
    monkeypatch.setenv("SHAPER_NATIVE", "ifma")
    if native.ifma_available():
        assert kernels.get_kernel().name == "native-ifma"
    else:
        with pytest.raises(RuntimeError, match="IFMA"):
            native.chosen_engine()
    monkeypatch.setenv("SHAPER_NATIVE", "auto")
    name = kernels.get_kernel().name
    assert name == "native-ifma" if native.ifma_available() else name.startswith("gmpy2")


def _rows(values, words):
    return np.frombuffer(b"".join(int(v).to_bytes(8 * words, "little") for v in values),
                         dtype="<u8").reshape(len(values), words).copy()


def _ints(arr):
    return [int.from_bytes(r.tobytes(), "little") for r in arr]


@pytest.mark.parametrize("bits", [512, 2048, 6144])
def test_montgomery_rows_round_trip_and_operations(kernel, bits):
    m = _modulus(bits)
    count = 19
    xs = [secrets.randbelow(m) for _ in range(count)]
    xs[:3] = [0, 1, m - 1]
    ys = [secrets.randbelow(m) for _ in range(count)]
    a, b = kernel.mont(xs, m), kernel.mont(ys, m)
    assert a.to_ints() == xs
    # stored rows are the engine's digits of x * R mod m, checked on the way in
    assert a.rows.shape == (count, a.ctx.mont_width)
    bad = a.rows.copy()
    bad[1, :] = np.uint64(2**52 - 1) if a.ctx.engine == "ifma" else np.uint64(2**64 - 1)
    with pytest.raises(ValueError, match="row 1 is not a Montgomery value"):
        a.ctx.mont_mul(bad, b.rows)
    assert kernel.mont_mul(a, b).to_ints() == [x * y % m for x, y in zip(xs, ys)]
    es = [secrets.randbits(200) for _ in range(count)]
    es[3] = 0
    assert kernel.mont_powmod(a, es).to_ints() == [pow(x, e, m) for x, e in zip(xs, es)]
    assert kernel.mont_powmod_same(a, 1 << 70).to_ints() == [pow(x, 1 << 70, m) for x in xs]
    # CSR row products, including an empty row and a row longer than one 64-factor piece
    indptr = np.array([0, 3, 3, 150, 151], dtype=np.int64)
    indices = np.array([secrets.randbelow(count) for _ in range(151)], dtype=np.int64)
    expect = []
    for r in range(4):
        p = 1
        for i in indices[indptr[r]:indptr[r + 1]]:
            p = p * xs[i] % m
        expect.append(p)
    assert kernel.mont_prod_rows(a, indices, indptr).to_ints() == expect
    # fixed base with Montgomery multipliers in and the result in Montgomery form
    g = secrets.randbelow(m - 2) + 2
    e1 = [secrets.randbits(100) for _ in range(count)]
    out = kernel.mont_fixed_base([FixedBaseSpec(g, m, 100)], [int_to_exponent_bytes(e1)], a, m)
    assert out.to_ints() == [x * pow(g, e, m) % m for x, e in zip(xs, e1)]


def test_montgomery_rows_move_between_engines():
    m = _modulus(1024)
    xs = [secrets.randbelow(m) for _ in range(9)]
    port = NativeKernel("portable")
    rows = port.mont(xs, m)
    engines = ["portable"] + (["ifma"] if native.ifma_available() else [])
    for other in (NativeKernel(name) for name in engines):  # re-encoded for another engine's R
        assert other.mont_mul(rows, other.mont([1] * 9, m)).to_ints() == xs
    assert rows.take(np.array([2, 2, 0])).to_ints() == [xs[2], xs[2], xs[0]]


def test_montgomery_arrays_survive_a_kernel_switch(monkeypatch):
    """Arrays made under the native kernel keep working (as integers) after SHAPER_NATIVE=off."""
    from shaper import kernels
    from shaper.crypto import paillier

    pk, sk = paillier.keygen(512)
    monkeypatch.setenv("SHAPER_NATIVE", "ifma" if native.ifma_available() else "portable")
    enc = pk.encrypt(np.array([3, -4, 5]))
    assert enc._mont is not None
    monkeypatch.setenv("SHAPER_NATIVE", "off")
    assert kernels.get_kernel().name.startswith("gmpy2")
    out = (enc.rescaled(3) + enc[::-1]) * 2
    x = np.array([3, -4, 5])
    np.testing.assert_array_equal(sk.decrypt(out), (x + x[::-1]) * 2)  # fixed point: scale 2^3


@pytest.mark.parametrize("window", [1, 5, 9, 12])
def test_direct_tables_read_by_index(window):
    """Tables for constant_time=False specs: entries in plain order, read by index, windows up
    to 12 bits; same results as pow, with Montgomery multipliers in and out too."""
    m = _modulus(1100)
    engines = ["portable"] + (["ifma"] if native.ifma_available() else [])
    words = (m.bit_length() + 63) // 64
    base = secrets.randbelow(m)
    es = [secrets.randbits(70) for _ in range(21)]
    es[:2] = [(1 << 70) - 1, 0]
    mult = [secrets.randbelow(m) for _ in es]
    for engine in engines:
        ctx = _native.Context(_rows([m], words)[0], engine)
        table = ctx.comb_table(_rows([base], words)[0], window, -(-70 // window), direct=True)
        assert table.direct and table.window == window
        got = ctx.fixed_base([table], [_rows(es, 2)], _rows(mult, words))
        assert _ints(got) == [x * pow(base, e, m) % m for x, e in zip(mult, es)]
    with pytest.raises(ValueError, match="window must be 1..=12"):
        ctx.comb_table(_rows([base], words)[0], 13, 6, direct=True)
    with pytest.raises(ValueError, match=r"1..=8 bits \(constant-time tables\)"):
        ctx.comb_table(_rows([base], words)[0], 9, 8)


def test_fast_public_encryption_uses_a_direct_table(monkeypatch):
    """constant_time=False: a direct (index-read) table, correct ciphertexts, and with the same
    randomness exactly the ciphertexts of the constant-time table."""
    from shaper import kernels
    from shaper.crypto import ou, paillier

    monkeypatch.setenv("SHAPER_NATIVE", "ifma" if native.ifma_available() else "portable")
    kernel = kernels.get_kernel()
    assert isinstance(kernel, NativeKernel)
    x = np.array([0, 1, -1, 2**40, -(2**50)], dtype=np.int64)
    for scheme in (paillier, ou):
        pk, sk = scheme.keygen(1024)
        fast, slow = pk.encrypt(x, constant_time=False), pk.encrypt(x)
        np.testing.assert_array_equal(sk.decrypt(fast), x)
        np.testing.assert_array_equal(sk.decrypt(slow), x)
        spec = pk._randomizer_spec_fast if scheme is paillier else pk._fast_specs[0]
        assert kernel.table(spec).direct and not kernel.table(pk._randomizer_spec).direct
        r = np.frombuffer(secrets.token_bytes(5 * ((pk.exponent_bits + 7) // 8)), dtype=np.uint8).reshape(5, -1)
        a = pk.raw_encrypt(x.tolist(), r, constant_time=False)
        b = pk.raw_encrypt(x.tolist(), r, constant_time=True)
        assert [int(v) for v in a] == [int(v) for v in b]
