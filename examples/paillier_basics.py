"""Encrypted arrays in 25 lines: encrypt, compute without the key, pack, decrypt.

    python examples/paillier_basics.py
"""

import numpy as np
import scipy.sparse as sp

from shaper.crypto import pack, paillier

public_key, private_key = paillier.keygen(2048)            # DJN Paillier, CRT, 0600 on save

weights = np.array([0.25, -1.5, 3.0, 0.125])
enc = public_key.encrypt(weights, frac_bits=16)            # fixed point, scale 2^16

X = sp.csr_matrix(np.array([[1, 0, 1, 0],                  # sparse 0/1 features: the
                            [0, 1, 1, 1],                  # product costs one ciphertext
                            [1, 1, 0, 0]]))                # multiplication per non-zero
scores = X @ enc + 0.5                                     # encrypted mat-vec, + plaintext
scores = (scores * 2).rerandomize()                        # scalar multiply; fresh randomness

packed = pack(scores, value_bits=24)                       # many values per ciphertext
print("decrypted:", private_key.decrypt(packed))
print("numpy    :", (X @ weights + 0.5) * 2)
