"""The gmpy2 kernel against Python's built-in ``pow`` and plain loops."""

import secrets

import numpy as np
import pytest

from shaper.kernels import FixedBaseSpec, exponent_digits, int_to_exponent_bytes
from shaper.kernels.base import significant_windows
from shaper.kernels.gmp import GmpKernel, choose_window

MODULI = [2**127 - 1, (2**521 - 1) * (2**127 - 1), secrets.randbits(2048) | 1 | (1 << 2047)]


@pytest.fixture
def kernel():
    return GmpKernel(table_budget_bytes=1 << 20)


@pytest.mark.parametrize("m", MODULI)
def test_powmod_variants_match_pow(kernel, m):
    bases = [0, 1, m - 1, 2, secrets.randbelow(m), secrets.randbelow(m) + m]
    exps = [0, 1, 2, 65537, secrets.randbits(200), 0]
    assert kernel.powmod(bases, exps, m) == [pow(b, e, m) for b, e in zip(bases, exps)]
    e = secrets.randbits(300)
    assert kernel.powmod_same_exponent(bases, e, m) == [pow(b, e, m) for b in bases]
    assert kernel.powmod_same_exponent([], e, m) == []


@pytest.mark.parametrize("m", MODULI)
@pytest.mark.parametrize("exp_bits", [1, 8, 63, 200])
def test_fixed_base_matches_pow(kernel, m, exp_bits):
    g, h = secrets.randbelow(m - 2) + 2, secrets.randbelow(m - 2) + 2
    count = 11  # not a multiple of anything in particular
    e1 = [secrets.randbits(exp_bits) for _ in range(count)]
    e2 = [secrets.randbits(exp_bits) for _ in range(count)]
    e1[0] = 0
    e2[:2] = [0, (1 << exp_bits) - 1]
    mult = [secrets.randbelow(m) for _ in range(count)]
    specs = [FixedBaseSpec(g, m, exp_bits), FixedBaseSpec(h, m, exp_bits)]
    exps = [int_to_exponent_bytes(e1), int_to_exponent_bytes(e2)]
    got = kernel.fixed_base_powmod(specs, exps, mult, m)
    assert got == [x * pow(g, a, m) * pow(h, b, m) % m for x, a, b in zip(mult, e1, e2)]
    got = kernel.fixed_base_powmod(specs[:1], exps[:1], None, m)
    assert got == [pow(g, a, m) for a in e1]


def test_fixed_base_tables_grow_lazily(kernel):
    m = MODULI[1]
    spec = FixedBaseSpec(5, m, 4096)
    small = int_to_exponent_bytes([3, 250])
    assert kernel.fixed_base_powmod([spec], [small], None, m) == [pow(5, 3, m), pow(5, 250, m)]
    table = kernel.table(spec)
    assert table.windows == -(-8 // table.window)
    big = int_to_exponent_bytes([2**1000 + 1])
    assert kernel.fixed_base_powmod([spec], [big], None, m) == [pow(5, 2**1000 + 1, m)]
    assert table.windows >= -(-1001 // table.window)


def test_fixed_base_argument_checks(kernel):
    m = MODULI[0]
    spec = FixedBaseSpec(3, m, 16)
    e = int_to_exponent_bytes([1, 2])
    with pytest.raises(ValueError, match="one exponent array per spec"):
        kernel.fixed_base_powmod([spec], [], None, m)
    with pytest.raises(ValueError, match="multipliers"):
        kernel.fixed_base_powmod([spec], [e], [1], m)
    with pytest.raises(ValueError, match="share the modulus"):
        kernel.fixed_base_powmod([spec], [e], None, m + 2)
    with pytest.raises(ValueError):
        FixedBaseSpec(0, m, 16)


def test_mulmod_prod_rows_invert(kernel):
    m = 2**521 - 1  # prime, so every non-zero value is invertible
    vals = [secrets.randbelow(m - 1) + 1 for _ in range(9)]
    assert kernel.mulmod(vals, vals[::-1], m) == [a * b % m for a, b in zip(vals, vals[::-1])]
    indices = np.array([0, 3, 3, 8, 1, 2])
    indptr = np.array([0, 2, 2, 3, 6])
    expected = [vals[0] * vals[3] % m, 1, vals[3] % m, vals[8] * vals[1] * vals[2] % m]
    assert kernel.prod_rows(vals, indices, indptr, m) == expected
    for count in (1, 3, 9):  # below and above the batch-inversion threshold
        inv = kernel.invert(vals[:count], m)
        assert [a * b % m for a, b in zip(vals, inv)] == [1] * count


def test_batch_invert_names_the_non_unit(kernel):
    m = 15
    with pytest.raises(ZeroDivisionError, match="index 3"):
        kernel.invert([1, 2, 4, 5, 7], m)


def test_exponent_digits_match_integer_arithmetic():
    values = [0, 1, 2**64 + 3, secrets.randbits(300), (1 << 300) - 1]
    data = int_to_exponent_bytes(values, width=38)
    for w in (1, 5, 8, 11, 16):
        windows = -(-300 // w)
        digits = exponent_digits(data, w, windows)
        for row, v in zip(digits.tolist(), values):
            assert sum(d << (w * i) for i, d in enumerate(row)) == v
    assert significant_windows(data, 8) == 38
    assert significant_windows(int_to_exponent_bytes([0, 0]), 8) == 0
    with pytest.raises(ValueError, match="longer than the table"):
        exponent_digits(int_to_exponent_bytes([1 << 40]), 8, 2)


def test_window_choice_respects_budget():
    assert choose_window(1024, 4096, budget_bytes=64 << 20) == 10
    assert choose_window(1024, 4096, budget_bytes=1 << 20) < 10
    for w_bits, mod_bits, budget in ((1024, 4096, 64 << 20), (224, 2048, 64 << 20), (100, 512, 1 << 16)):
        w = choose_window(w_bits, mod_bits, budget_bytes=budget)
        assert -(-w_bits // w) * (1 << w) * (mod_bits // 8 + 48) <= budget or w == 2


def test_horner_packs_columns(kernel):
    m = 2**521 - 1
    cols = [[secrets.randbelow(m) for _ in range(5)] for _ in range(4)]
    shift = 37
    expected = []
    for g in range(5):
        acc = cols[-1][g]
        for j in (2, 1, 0):
            acc = pow(acc, 1 << shift, m) * cols[j][g] % m
        expected.append(acc)
    assert kernel.horner(cols, shift, m) == expected
    assert kernel.horner([cols[0]], shift, m) == [v % m for v in cols[0]]


def test_horner_multiexp_matches_pow(kernel):
    m = 2**521 - 1
    T, slots, groups, shift = 2, 4, 3, 80
    bases = [[[secrets.randbelow(m) for _ in range(groups)] for _ in range(slots)] for _ in range(T)]
    exps = [[[secrets.randbits(64) for _ in range(groups)] for _ in range(slots)] for _ in range(T)]
    exps[0][0][0], exps[1][0][0] = 0, 0  # an empty slot
    expected = []
    for g in range(groups):
        acc = 1
        for j in range(slots - 1, -1, -1):
            term = pow(bases[0][j][g], exps[0][j][g], m) * pow(bases[1][j][g], exps[1][j][g], m) % m
            acc = pow(acc, 1 << shift, m) * term % m
        expected.append(acc)
    assert kernel.horner_multiexp(bases, exps, shift, m) == expected
    with pytest.raises(ValueError, match="exceed"):
        kernel.horner_multiexp([[[2], [3]]], [[[1 << 90], [1]]], shift, m)  # slot 0 is shifted
