"""A bank and a merchant compute a sparse matrix-vector product without revealing their data.

The merchant holds a sparse 0/1 feature matrix X (customers x product categories); the bank holds
a weight per category. Together they compute shares of X @ w (SHAPER's secure sparse mat-vec:
the bank's vector travels encrypted, the merchant's sparsity pattern never leaves), multiply the
result by a bank-held scaling vector with a Beaver triple made by TriGen, and reveal only the
final scores to the bank.

    python examples/hybrid_sparse_matvec.py            # 2 local processes over loopback TLS
"""

import numpy as np
import scipy.sparse as sp

from shaper.net import launch
from shaper.protocols import Hybrid2PC

CUSTOMERS, CATEGORIES = 300, 40


def merchant_data():
    rng = np.random.default_rng(1)  # demo data
    X = sp.random(CUSTOMERS, CATEGORIES, density=0.1, format="csr", random_state=rng)
    X.data[:] = 1
    return X.astype(np.int64)


def bank_data():
    rng = np.random.default_rng(2)  # demo data
    return rng.integers(-5, 6, CATEGORIES), rng.uniform(0.5, 2.0, CUSTOMERS)


def job(session):
    ctx = Hybrid2PC.setup(session, key_bits=2048)           # each side: its own Paillier key pair
    merchant, bank = 0, 1
    X = merchant_data() if ctx.me == merchant else None
    w, scale = bank_data() if ctx.me == bank else (None, None)
    ctx.generate_triples(CUSTOMERS)                          # offline phase: TriGen, no dealer
    w_shared = ctx.share(w, owner=bank, frac_bits=0)
    z = ctx.sparse_matvec(X, w_shared, owner=merchant)       # shares of X @ w
    s = ctx.share(scale, owner=bank)
    scores = (z.rescaled(ctx.frac_bits) * s)                 # Beaver multiplication
    result = scores.reveal(to=bank)
    return result, session.stats.as_dict()


if __name__ == "__main__":
    (_, merchant_stats), (scores, bank_stats) = launch(["merchant", "bank"], job)
    w, scale = bank_data()
    expected = (merchant_data() @ w) * scale
    print("first scores:", np.round(scores[:5], 3))
    print("plaintext   :", np.round(expected[:5], 3))
    print("max error   :", float(np.max(np.abs(scores - expected))))
    print(f"traffic: merchant sent {merchant_stats['bytes_sent']:,} B, bank sent {bank_stats['bytes_sent']:,} B")
