"""GMPFHE's key generation for GHS-style BGV: single-key BGV keys generated inside the n-party
MPC (GMPFHE §5.2), with threshold CKKS's structure (:mod:`shaper.protocols.threshold_ckks.keygen`).

The secret s is a shared uniform ternary polynomial, or one of exactly h nonzero ±1 coefficients
(GMPFHE's oblivious shuffle, :func:`shaper.protocols.additive.sampling.hamming_weight`), shared
over every prime of the basis and moved to evaluation form locally. The errors are discrete
Gaussians of width ``params.sigma`` sampled in the MPC (exact single-key distribution), doubled
(plaintext modulus 2). The uniform ``a`` polynomials come from joint seeds no party chose alone;
s² comes from square pairs per evaluation point and limb; s(X^u) is a permutation of each party's
evaluation points. Each key's b is this party's local share (:mod:`shaper.crypto.bgv.multiparty`)
opened to every party with commit-before-open (:func:`~shaper.protocols.threshold_ckks.commit.committed_open_rows`:
a party whose opening does not match its commitment is named in a
:class:`~shaper.errors.KeyValidationError`, and no key is returned). With ``check``, a jointly
seeded slot vector is encrypted, multiplied and moved by every automorphism key, decrypted to
bits jointly and compared with the plaintext slot simulator.

Security model: the engine's (passive, dishonest majority); the commitments stop a party that
sends last from choosing a key. The keys come back as a :class:`~.keystore.JointKeys` with this
party's :class:`~shaper.crypto.bgv.multiparty.SecretKeyShare` and a fresh ledger (the key's
decryption budget); ``keys.save(dir)`` writes the key directory.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ...crypto.bgv import multiparty, scheme
from ...crypto.bgv.multiparty import SecretKeyShare
from ...crypto.bgv.params import Parameters
from ...crypto.bgv.slots import SlotEvaluator
from ...crypto.ckks.multiparty import DEFAULT_BUDGET
from ...crypto.prg import Prg
from ...errors import KeyValidationError
from ...net.phases import Phases, Progress
from ..additive.sampling import gaussian_tail, hamming_weight
from ..threshold_ckks.commit import committed_open_rows
from ..threshold_ckks.ledger import Ledger
from ..threshold_ckks.polys import joint_seed, share_rows
from .decrypt import decrypt_bits
from .keystore import JointKeys

__all__ = ["keygen"]


def keygen(engine: Any, params: Parameters, galois: Iterable[int] = (), *, check: bool = True,
           budget: int = DEFAULT_BUDGET, progress: Progress | None = None) -> JointKeys:
    """BGV keys made inside the MPC; every party calls this with its engine and the same
    arguments. ``galois``: the automorphism exponents u to make keys for (e.g. an AES plan's
    ``automorphisms``); ``budget``: the decryptions the key allows (its ledger). Returns this
    party's :class:`~.keystore.JointKeys`."""
    ledger = Ledger(budget=budget, scheme="bgv")  # a bad budget fails here, before any MPC work
    gaussian_tail(float(params.sigma))  # a width the MPC sampler builds, or a ConfigError first
    ring = scheme._ring(params)
    basis = params.basis
    full = list(range(len(basis)))
    chain = ring.chain(params.max_level)
    phi = params.phi
    me = engine.session.index
    phases = Phases(engine, progress)

    def secret() -> np.ndarray:
        if params.hamming_weight is None:
            shares = engine.ternary((phi,), basis)
        else:
            shares = hamming_weight(engine, 1, phi, params.hamming_weight, basis)
            shares.share = shares.share.reshape(phi, len(basis))
        return ring.forward(share_rows(shares), full)

    s = phases.run("secret key", secret, phi)

    def errors(count: int, limbs: list[int]) -> np.ndarray:  # shares of 2e, evaluation form
        e = engine.gaussian(count * phi, [basis[i] for i in limbs], sigma=float(params.sigma))
        rows = np.ascontiguousarray(np.swapaxes(e.share.reshape(count, phi, len(limbs)), 1, 2))
        return ring.forward(ring.add(rows, rows, limbs), limbs)

    def uniform(seed: bytes, count: int, limbs: list[int]) -> np.ndarray:
        prg = Prg(seed)
        return np.stack([scheme._uniform(ring, limbs, prg) for _ in range(count)])

    def public_key() -> scheme.PublicKey:
        a = uniform(joint_seed(engine, "bgv-pk"), 1, chain)[0]
        b = multiparty.public_key_share(ring, np.ascontiguousarray(s[chain]), a, errors(1, chain)[0])
        return scheme.PublicKey(params, committed_open_rows(engine, b, params.primes, what="bgv-pk"), a)

    public = phases.run("public key", public_key, phi)

    def square() -> np.ndarray:  # open d = s - alpha; s^2 = d^2 + 2 d alpha + alpha^2
        alpha, alpha2 = engine.square_pairs(phi, basis)
        alpha, alpha2 = share_rows(alpha), share_rows(alpha2)
        d = committed_open_rows(engine, ring.sub(s, alpha, full), basis, what="bgv-s2-masked")
        return multiparty.square_share(ring, d, alpha, alpha2, me == 0)

    def switching(target: np.ndarray, what: str) -> scheme.SwitchingKey:
        a = uniform(joint_seed(engine, what), params.digits, full)
        b = multiparty.switching_key_share(ring, s, target, a, errors(params.digits, full))
        return scheme.SwitchingKey(params, committed_open_rows(engine, b, basis, what=what), a)

    s2 = phases.run("s^2 (square pairs)", square, phi * len(basis))
    relin = phases.run("relinearisation key", lambda: switching(s2, "bgv-rlk"), phi * params.digits)
    keys: dict[int, scheme.SwitchingKey] = {}
    for u in sorted({int(u) % params.m for u in galois} - {1}):
        keys[u] = phases.run(f"automorphism key u={u}", lambda u=u: switching(ring.automorphism(s, u), f"bgv-u{u}"),
                             phi * params.digits)
    share = SecretKeyShare(params, s, me, engine.session.n)
    joint = JointKeys(params, public, relin, keys, share, phases.done, ledger)
    if check:
        phases.run("check (joint test decryption to bits)", lambda: check_joint_keys(engine, joint))
    return joint


def check_joint_keys(engine: Any, keys: JointKeys) -> None:
    """Encrypts a jointly seeded slot vector x, computes x·x and κ_u(x) for every automorphism key,
    decrypts each to bits jointly and compares with the slot simulator; a key that does not work
    raises :class:`~shaper.errors.KeyValidationError`."""
    prg = Prg(joint_seed(engine, "bgv-check"))
    ev = keys.evaluator()
    alg = ev.algebra
    sim = SlotEvaluator(alg)
    x = prg.below(1 << alg.d, alg.nslots).astype(np.uint64)
    cx = scheme.encrypt(keys.public, ev.encode(x), prg=prg)
    tests = [("relinearisation key", ev.mul(cx, cx), sim.mul(x, x))]
    tests += [(f"automorphism key u={u}", ev.automorphism(cx, u), sim.automorphism(x, u)) for u in keys.galois]
    got = decrypt_bits(engine, keys.share, [ct for _, ct, _ in tests])  # one conversion for every test
    for (what, _, want), bits in zip(tests, got, strict=True):
        if not np.array_equal(alg.decode(bits), want):
            raise KeyValidationError(f"the jointly generated BGV {what} fails its test decryption")
