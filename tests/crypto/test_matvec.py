"""Plaintext sparse/dense matrix times encrypted vector, against numpy/scipy."""

import numpy as np
import pytest
import scipy.sparse as sp

from shaper.crypto import matvec, vecmat
from shaper.crypto.prg import Prg


def _sparse(rows, cols, density, seed, values=(1,)):
    """Reproducible test matrix (a seeded PRG stream; test data, not secrets)."""
    prg = Prg(seed=bytes([seed]) * 32)
    nnz = int(rows * cols * density)
    draws = prg.uint64(3 * nnz).reshape(3, nnz) if nnz else np.zeros((3, 0), dtype=np.uint64)
    coords = dict.fromkeys(zip((draws[0] % rows).tolist(), (draws[1] % cols).tolist()))
    if not coords:
        return sp.csr_matrix((rows, cols), dtype=np.int64)
    i, j = zip(*coords)
    data = [values[int(k) % len(values)] for k in draws[2][: len(coords)].tolist()]
    return sp.csr_matrix((data, (i, j)), shape=(rows, cols))


def test_binary_sparse_matvec_uses_products_only(scheme_keys, monkeypatch):
    pk, sk = scheme_keys
    X = _sparse(30, 12, 0.2, 1)
    x = np.arange(-6, 6)
    enc = pk.encrypt(x)
    from shaper.kernels import gmp

    def forbidden(*a, **k):
        raise AssertionError("0/1 matrix must not exponentiate")

    monkeypatch.setattr(gmp.GmpKernel, "powmod", forbidden)
    out = sk.decrypt(X @ enc)
    np.testing.assert_array_equal(out, X @ x)


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "dense"])
def test_integer_matrix_with_negatives_any_format(paillier_keys, fmt):
    pk, sk = paillier_keys
    X = _sparse(20, 9, 0.3, 2, values=(1, -1, 2, -7, 100, -(2**40)))
    x = np.array([3, -1, 4, 1, -5, 9, 2, -6, 5])
    M = X.toarray() if fmt == "dense" else X.asformat(fmt)
    np.testing.assert_array_equal(sk.decrypt(M @ pk.encrypt(x)), X.toarray().astype(object) @ x.astype(object))


def test_vector_times_matrix(scheme_keys):
    pk, sk = scheme_keys
    X = _sparse(15, 7, 0.3, 3, values=(1, 2, -3))
    x = np.arange(15) - 7
    np.testing.assert_array_equal(sk.decrypt(pk.encrypt(x) @ X), x @ X.toarray())
    np.testing.assert_array_equal(sk.decrypt(vecmat(pk.encrypt(x), X)), x @ X.toarray())


def test_float_matrix_fixed_point(paillier_keys):
    pk, sk = paillier_keys
    X = np.array([[0.5, 0.0, -1.25], [0.0, 2.0, 0.0]])
    x = np.array([1.5, -2.0, 4.0])
    enc = pk.encrypt(x, frac_bits=10)
    out = X @ enc
    assert out.frac_bits == 20
    np.testing.assert_allclose(sk.decrypt(out), X @ x)
    ints = pk.encrypt([1, 2, 3])
    with pytest.raises(TypeError, match="frac_bits"):
        X @ ints
    np.testing.assert_allclose(sk.decrypt(matvec(X, ints, frac_bits=8)), X @ np.array([1, 2, 3]))


def test_empty_rows_and_empty_matrix(paillier_keys):
    pk, sk = paillier_keys
    X = sp.csr_matrix(np.array([[0, 0], [1, 1]]))
    np.testing.assert_array_equal(sk.decrypt(X @ pk.encrypt([4, 5])), [0, 9])
    Z = sp.csr_matrix((3, 2), dtype=np.int64)
    np.testing.assert_array_equal(sk.decrypt(Z @ pk.encrypt([4, 5])), [0, 0, 0])


def test_shape_errors(paillier_keys):
    pk, _ = paillier_keys
    with pytest.raises(ValueError, match="shape mismatch"):
        sp.csr_matrix(np.ones((2, 3), dtype=int)) @ pk.encrypt([1, 2])
    with pytest.raises(ValueError, match="1-D"):
        matvec(np.ones((2, 2), dtype=int), pk.encrypt([[1, 2], [3, 4]]))


@pytest.mark.parametrize("shape,density", [((40, 30), 1.0), ((60, 25), 0.5), ((8, 16), 1.0)])
def test_shared_base_multiexponentiation_matches_exact_products(scheme_keys, shape, density, monkeypatch):
    """Many rows over the same bases with long signed exponents take Straus' path (checked by
    counting its calls): exact against Python integers, including empty rows and extreme values."""
    import shaper.crypto.ahe as ahe

    calls = []
    real = ahe._multiexp_rows
    monkeypatch.setattr(ahe, "_multiexp_rows", lambda *a: calls.append(1) or real(*a))
    pk, sk = scheme_keys
    rows, cols = shape
    prg = Prg(seed=bytes([shape[0]]) * 32)
    raw = (prg.uint64(rows * cols).astype(np.int64) >> 38).reshape(rows, cols)  # signed, up to 2^25
    keep = (prg.uint64(rows * cols) % 100 < density * 100).reshape(rows, cols)
    X = np.where(keep, raw, 0)
    X[3] = 0  # an empty row
    X[0, 0], X[1, 1] = (1 << 25) - 1, -(1 << 25)
    x = np.arange(cols) - cols // 2
    out = sk.decrypt(matvec(sp.csr_matrix(X) if density < 1 else X, pk.encrypt(x)))
    np.testing.assert_array_equal(np.array(out, dtype=object), X.astype(object) @ x.astype(object))
    assert calls == [1]
