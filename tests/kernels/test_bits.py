"""The bit-sliced gates of replicated sharing: the numpy path against a per-bit reference, and
the native kernel against the numpy path (bit-identical), including in-place gate chains."""

import numpy as np
import pytest

from shaper.kernels import bits

rng = np.random.default_rng(5)  # test data only
SLOTS, WORDS = 12, 9


def _state():
    return rng.integers(0, 2**64, (SLOTS, WORDS), dtype=np.uint64), rng.integers(0, 2**64, (SLOTS, WORDS), dtype=np.uint64)


def _local_rows(count):
    ops = rng.choice([bits.XOR, bits.XOR3, bits.INV, bits.EQW, bits.EQ0, bits.EQ1], count)
    rows = rng.integers(0, SLOTS, (count, 5)).astype(np.int32)
    rows[:, 0] = ops
    return rows


def _reference_local(X, A, rows):
    X, A = X.copy(), A.copy()
    for op, a, b, c, o in rows.tolist():  # one gate at a time, the textbook way
        xa, aa = X[a].copy(), A[a].copy()
        if op == bits.XOR:
            X[o], A[o] = xa ^ X[b], aa ^ A[b]
        elif op == bits.XOR3:
            X[o], A[o] = xa ^ X[b] ^ X[c], aa ^ A[b] ^ A[c]
        elif op == bits.INV:
            X[o], A[o] = xa, np.invert(aa)
        elif op == bits.EQW:
            X[o], A[o] = xa, aa
        else:
            X[o], A[o] = 0, (np.uint64(2**64 - 1) if op == bits.EQ1 else 0)
    return X, A


def test_numpy_local_gates_match_the_reference(monkeypatch):
    monkeypatch.setattr(bits, "native_gates", lambda: False)
    X, A = _state()
    rows = _local_rows(200)  # slots reused: later gates read what earlier ones wrote
    want = _reference_local(X, A, rows)
    bits.local(X, A, rows)
    np.testing.assert_array_equal(X, want[0])
    np.testing.assert_array_equal(A, want[1])


def test_numpy_and_layer(monkeypatch):
    monkeypatch.setattr(bits, "native_gates", lambda: False)
    X, A = _state()
    ands = np.array([[0, 1, 5], [2, 3, 6], [4, 4, 7]], dtype=np.int32)
    m1, m2 = (rng.integers(0, 2**64, (3, WORDS), dtype=np.uint64) for _ in range(2))
    r = np.empty((3, WORDS), dtype=np.uint64)
    bits.and_masked(X, A, ands, r, m1, m2)
    for g, (a, b, _) in enumerate(ands.tolist()):
        np.testing.assert_array_equal(r[g], m1[g] ^ m2[g] ^ (X[a] & X[b]) ^ (A[a] & A[b]))
    r_prev = rng.integers(0, 2**64, (3, WORDS), dtype=np.uint64)
    bits.and_finish(X, A, ands, r, r_prev)
    for g, (_, _, o) in enumerate(ands.tolist()):
        np.testing.assert_array_equal(X[o], r_prev[g] ^ r[g])
        np.testing.assert_array_equal(A[o], r[g])


def test_numpy_gates_reject_bad_slots(monkeypatch):
    monkeypatch.setattr(bits, "native_gates", lambda: False)
    X, A = _state()
    with pytest.raises(ValueError, match="slot"):
        bits.local(X, A, np.array([[bits.XOR, 0, SLOTS, -1, 1]], dtype=np.int32))
    with pytest.raises(ValueError, match="gate code"):
        bits.local(X, A, np.array([[9, 0, 1, -1, 1]], dtype=np.int32))


@pytest.mark.skipif(not bits.native_gates(), reason="native extension not built or SHAPER_NATIVE=off")
def test_native_gates_match_numpy(monkeypatch):
    X, A = _state()
    rows = _local_rows(300)
    ands = np.array([[0, 1, 5], [2, 3, 6], [4, 4, 7], [8, 9, 10]], dtype=np.int32)
    m1, m2 = (rng.integers(0, 2**64, (4, WORDS), dtype=np.uint64) for _ in range(2))
    r_prev = rng.integers(0, 2**64, (4, WORDS), dtype=np.uint64)
    runs = []
    for native in (True, False):
        monkeypatch.setattr(bits, "native_gates", lambda native=native: native)
        x, a, r = X.copy(), A.copy(), np.empty((4, WORDS), dtype=np.uint64)
        bits.local(x, a, rows)
        bits.and_masked(x, a, ands, r, m1, m2)
        bits.and_finish(x, a, ands, r, r_prev)
        runs.append((x, a, r))
    for fast, slow in zip(*runs):
        np.testing.assert_array_equal(fast, slow)
