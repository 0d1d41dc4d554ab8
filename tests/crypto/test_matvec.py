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
