"""Threshold CKKS by MPC key generation (GMPFHE): n parties generate the keys of ordinary
single-key RNS-CKKS inside the n-party MPC engine, anyone computes with them, and the parties
decrypt jointly.

The pieces (Lattigo's split: local steps apart from the protocol that moves them):

* :mod:`shaper.crypto.ckks.multiparty` — the local steps on one party's share, no I/O;
* :mod:`.keygen` — :func:`keygen` over the n-party engine, with its joint test decryption;
* :mod:`.decrypt` — :func:`decrypt` / :func:`decrypt_many`: consent, joint smudging, opening;
* :mod:`.keystore` — :class:`PublicKeys`, :class:`JointKeys` and the key directory on disk;
* :mod:`.polys` — shared polynomials on the engine (kernel rows, openings, joint seeds).

The jobs of ``shaper fhe`` (``keygen_job``, ``decrypt_job``, ``engine_for``) are in
:mod:`shaper.jobs.fhe`; the CNN's parameters (``CNN_CHAIN``, ``CNN_ROTATIONS``,
``cnn_parameters``) in :mod:`shaper.ml.cnn.params`.

Security model: passive (semi-honest) parties, dishonest majority (any n - 1 may collude), as
the engine (:class:`~shaper.protocols.additive.AdditiveEngine`). What each party learns:

* the public key, the relinearisation key and the rotation keys, opened. With the default
  ``method="exact"`` (the paper's) the secret s is a uniform ternary polynomial and every error a
  discrete Gaussian of sigma 3.2, both sampled *inside* the MPC, so the opened keys have exactly
  the single-key distribution: their security is single-key RLWE at these parameters.
  ``method="local"`` (OpenFHE and Lattigo's way) keeps s joint but lets every party add its own
  Gaussian error to its share of each key: no MPC Gaussian sampling at all, but the opened
  errors are sums of n Gaussians (sigma 3.2 sqrt(n)), known to each party in part; security then
  rests on the honest parties' errors alone and key-switching noise grows with sqrt(n).
* the masked differences of the square-pair multiplication for s^2 (uniform);
* its own additive share s_i of the secret (s = sum_i s_i on every limb, NTT form): uniform on
  its own, never sent, stored 0600. No coalition short of all n parties learns anything of s.
* per joint decryption, the recipient(s) learn m + e + r on limb q_0: the message, plus the
  ciphertext's error e, plus smudging noise r sampled jointly (see :func:`decrypt`).

Decryption: party i sends c_1 s_i (+ c_0 for party 0) + r_i on limb q_0, where r = sum r_i is
uniform in [-2^(k-1), 2^(k-1)) per coefficient and sampled *jointly* (edaBits): smudging each
party adds on its own would not be simulation-secure (the others' noise is known to a
coalition). The parties first exchange the ciphertext's digest and their consent: a party that
refuses, or holds a different ciphertext, stops the decryption before anything is opened.
docs/threshold-ckks.md has the smudging argument, its precision cost and the number of
decryptions a key may serve.
"""

from ...crypto.ckks.multiparty import SMUDGE_BITS, ciphertext_digest, decryption_precision
from ...net.phases import Phase
from .decrypt import SMUDGE_CHUNK, decrypt, decrypt_many
from .keygen import METHODS, check_joint_keys, keygen
from .keystore import SHARE_FILE, JointKeys, PublicKeys

__all__ = ["METHODS", "SHARE_FILE", "SMUDGE_BITS", "SMUDGE_CHUNK", "JointKeys", "Phase", "PublicKeys",
           "check_joint_keys", "ciphertext_digest", "decrypt", "decrypt_many", "decryption_precision", "keygen"]
