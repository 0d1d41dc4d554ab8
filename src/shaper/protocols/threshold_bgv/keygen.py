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

Security model: the engine's. On the passive engine (dishonest majority) the commitments stop a
party that sends last from choosing a key; on the active engine (:func:`_keygen_active`) every
opening is MAC-checked and every error range-checked. The keys come back as a :class:`~.keystore.JointKeys` with this
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
from ...crypto.ckks.keys import gaussian_bound, sample_gaussian
from ...crypto.ckks.multiparty import DEFAULT_BUDGET
from ...crypto.prg import Prg
from ...errors import KeyValidationError
from ...net.phases import Phases, Progress
from ..additive.sampling import gaussian_tail, hamming_weight
from ..threshold_ckks.commit import committed_open_rows
from ..threshold_ckks.ledger import Ledger
from ..threshold_ckks.keystore import AuthenticatedShare
from ..threshold_ckks.polys import SharedRows, active, joint_seed, linear, open_with_errors, share_rows
from .decrypt import decrypt_bits
from .keystore import JointKeys

__all__ = ["keygen"]


def keygen(engine: Any, params: Parameters, galois: Iterable[int] = (), *, check: bool | None = None,
           budget: int = DEFAULT_BUDGET, progress: Progress | None = None) -> JointKeys:
    """BGV keys made inside the MPC; every party calls this with its engine and the same
    arguments. ``galois``: the automorphism exponents u to make keys for (e.g. an AES plan's
    ``automorphisms``); ``budget``: the decryptions the key allows (its ledger). ``check``: the
    joint test decryption (:func:`check_joint_keys`); by default on the passive engine, where a
    party deviating inside the MPC could make a key wrong, and not on the active one, where every
    opening is MAC-checked, so the keys are the agreed function of s and the checked errors (the
    test would cost one checked conversion to bits of φ coefficients per key). Returns this
    party's :class:`~.keystore.JointKeys`."""
    ledger = Ledger(budget=budget, scheme="bgv")  # a bad budget fails here, before any MPC work
    if active(engine):
        return _keygen_active(engine, params, galois, bool(check), ledger, progress)
    check = True if check is None else check
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


def _keygen_active(engine: Any, params: Parameters, galois: Iterable[int], check: bool, ledger: Ledger,
                   progress: Progress | None) -> JointKeys:
    """:func:`keygen` on the active engine: s from the engine's ternary or fixed-weight sampler
    (authenticated), every error the sum of every party's own rounded Gaussian, each a
    range-checked input within ±⌊6σ⌋ in one anchor prime, every key's b = −a·[s] + … on
    authenticated shares plus each party's own 2e_i, opened and checked to carry exactly the
    committed errors in every limb (:func:`~shaper.protocols.threshold_ckks.polys.open_with_errors`),
    s² from square pairs with d = s − α opened checked. A deviating party can abort, or choose its own
    errors within their range; the noise estimates assume σ per error, and the decryption's
    range check refuses a phase that a worse error pushed past q_0/4."""
    ring = scheme._ring(params)
    basis = tuple(int(q) for q in params.basis)
    full = list(range(len(basis)))
    chain = ring.chain(params.max_level)
    phi = params.phi
    me = engine.session.index
    phases = Phases(engine, progress)
    automorphisms = sorted({int(u) % params.m for u in galois} - {1})
    # every error a range-checked input in the anchor prime, each entry 1 + 2 x 2 committed digits:
    # batches that the silent pool serves cheaper than COPE
    engine.expect_many(5 * phi * params.digits * (2 + len(automorphisms)))

    def secret() -> SharedRows:
        if params.hamming_weight is None:
            x = engine.ternary((phi,), basis)
        else:
            x = engine.hamming_weight(1, phi, params.hamming_weight, basis).reshape(phi)
        return SharedRows.of(engine, x).map(lambda r: ring.forward(r, full))

    s = phases.run("secret key", secret, phi)

    bound = gaussian_bound(params.sigma)

    def open_errors(base: SharedRows, count: int, limbs: list[int], what: str) -> np.ndarray:
        """base + 2e opened, e the sum of every party's own rounded Gaussian, each proven within
        ±⌊6σ⌋ in one anchor prime and checked into every limb (:func:`open_with_errors`)."""
        return open_with_errors(base, sample_gaussian((count, phi), params.sigma), -bound, bound, factor=2,
                                to_form=lambda r: ring.forward(r, limbs), from_form=lambda r: ring.inverse(r, limbs),
                                what=what)

    def uniform(seed: bytes, count: int, limbs: list[int]) -> np.ndarray:
        prg = Prg(seed)
        return np.stack([scheme._uniform(ring, limbs, prg) for _ in range(count)])

    def public_key() -> scheme.PublicKey:
        a = uniform(joint_seed(engine, "bgv-pk"), 1, chain)[0]
        zero = np.zeros_like(a)
        base = s.rows(chain).map(lambda s_: multiparty.public_key_share(ring, s_, a, zero))
        return scheme.PublicKey(params, open_errors(base, 1, chain, "bgv-pk"), a)

    public = phases.run("public key", public_key, phi)

    def square() -> SharedRows:  # open d = s - alpha; s^2 = d^2 + 2 d alpha + alpha^2
        alpha, alpha2 = (SharedRows.of(engine, x) for x in engine.square_pairs(phi, basis))
        d = linear(lambda s_, a_: ring.sub(s_, a_, full), s, alpha).open("bgv-s2-masked")
        s2 = linear(lambda a_, a2_: multiparty.square_share(ring, d, a_, a2_, False), alpha, alpha2)
        return s2.add_public(ring.mul(d, d, full))

    def switching(target: SharedRows, what: str) -> scheme.SwitchingKey:
        a = uniform(joint_seed(engine, what), params.digits, full)
        zero = np.zeros_like(a)
        base = linear(lambda s_, t_: multiparty.switching_key_share(ring, s_, t_, a, zero), s, target)
        return scheme.SwitchingKey(params, open_errors(base, params.digits, full, what), a)

    s2 = phases.run("s^2 (square pairs)", square, phi * len(basis))
    relin = phases.run("relinearisation key", lambda: switching(s2, "bgv-rlk"), phi * params.digits)
    keys: dict[int, scheme.SwitchingKey] = {}
    for u in automorphisms:
        keys[u] = phases.run(f"automorphism key u={u}",
                             lambda u=u: switching(s.map(lambda r: ring.automorphism(r, u)), f"bgv-u{u}"),
                             phi * params.digits)
    ledger.key_method = "contributed"
    share = SecretKeyShare(params, s.share, me, engine.session.n)
    joint = JointKeys(params, public, relin, keys, share, phases.done, ledger,
                      macs=AuthenticatedShare(engine.mac_keys(basis), s.mac))
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
    share = keys.secret(engine) if active(engine) else keys.share
    got = decrypt_bits(engine, share, [ct for _, ct, _ in tests])  # one conversion for every test
    for (what, _, want), bits in zip(tests, got, strict=True):
        if not np.array_equal(alg.decode(bits), want):
            raise KeyValidationError(f"the jointly generated BGV {what} fails its test decryption")
