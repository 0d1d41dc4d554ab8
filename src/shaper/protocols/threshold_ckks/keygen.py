"""GMPFHE's key generation: single-key CKKS keys generated inside the n-party MPC.

The secret s is a shared uniform ternary polynomial; s^2 is computed per NTT point and limb
with square pairs; s(X^g) is local on the shares; the uniform ``a`` polynomials come from
jointly drawn seeds; the errors are sampled in the MPC (``method="exact"``) or by each party on
its own (``"local"``), both of width ``params.sigma``. Each key is this party's local share
(:mod:`shaper.crypto.ckks.multiparty`) opened to every party; a joint test decryption checks the
result.

Commit before opening: every opening to all parties here (the public key's b, each switching
key's b, the masked difference d = s - alpha of s^2) and every joint seed (the ``a``
polynomials, the check vector) is committed first (:mod:`.commit`). Before, a party that sent
its share last (rushing) could read the honest shares and open a public key, a switching key or
a seed of its choosing, e.g. b = -a s' + e under a secret s' it knows, and make the check pass.
Now each party's opening is fixed by its commitment before it has seen anything of the others',
so a mismatch raises :class:`~shaper.errors.KeyValidationError` at every honest party, naming
the party, and no key is returned. A party that deviates otherwise inside the (passive) MPC can
still make the keys wrong, which the check decryption (:func:`check_joint_keys`) catches for keys
that do not work, but it cannot choose them.

On the active engine (:class:`~shaper.protocols.active.ActiveEngine`) every step runs on
authenticated shares (:class:`~.polys.SharedRows`: each local step linear in the shares, applied
to the MAC shares alike), every opening is MAC-checked, and ``method="local"`` takes each party's
error as a range-checked input, proven in one anchor prime and carried into every limb by the
key's opening, where it is checked against the anchor (:func:`~.polys.open_with_errors`; the
ledger's key method is then "contributed"): a party that deviates anywhere makes every honest party raise
:class:`~shaper.errors.DeviationError` before any key is returned. The keys carry this party's
MAC keys and MAC shares of s (:class:`~.keystore.AuthenticatedShare`), which later joint
encryptions and decryptions use.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ...crypto import ckks
from ...crypto.ckks.keys import expand_seed, gaussian_bound
from ...crypto.ckks.multiparty import (
    DEFAULT_BUDGET,
    check_bound,
    check_vectors,
    local_errors,
    local_errors_coefficients,
    public_key_share,
    square_share,
    switching_key_share,
)
from ...crypto.prg import Prg
from ...errors import ConfigError, KeyValidationError
from ...net.phases import Phases, Progress
from ..additive.sampling import gaussian_tail
from .decrypt import decrypt, plan_flood
from .inputs import noise_model
from .keystore import AuthenticatedShare, JointKeys
from .ledger import Ledger
from .polys import SharedRows, active, joint_seed, linear, ntt_copy, open_with_errors

__all__ = ["METHODS", "check_joint_keys", "keygen"]

#: key generation methods: the paper's (errors sampled in MPC) and the local-noise variant
METHODS = ("exact", "local")


def keygen(engine: Any, params: ckks.Parameters, *, rotations: Iterable[int] = (), conjugation: bool = False,
           method: str = "exact", check: bool = True, budget: int = DEFAULT_BUDGET,
           progress: Progress | None = None) -> JointKeys:
    """Generates single-key CKKS keys inside the MPC; every party calls this with its engine.

    The secret s is a shared uniform ternary polynomial; s^2 is computed per NTT point and limb
    with square pairs; s(X^g) is local on the shares; the uniform ``a`` polynomials come from
    jointly drawn seeds. ``method`` "exact" samples every error in the MPC, "local" lets each
    party add its own (module docstring); both of width ``params.sigma``. The public,
    relinearisation and rotation keys and the joint seeds are opened to every party with
    commit-before-open (a party whose opening does not match its commitment is named in a
    :class:`~shaper.errors.KeyValidationError` at every other party); with ``check`` a jointly
    chosen test vector is encrypted, multiplied, rotated and jointly decrypted, and a key that
    does not work raises :class:`~shaper.errors.KeyValidationError` (the check's two decryptions
    are charged to the key's decryption ``budget``, kept in the keys' :class:`~.ledger.Ledger`).
    ``progress`` gets one event per phase start and end (time, bytes this party sent)."""
    if method not in METHODS:
        raise ConfigError(f"unknown key-generation method {method!r}; choose from {', '.join(METHODS)}")
    sigma = float(params.sigma)
    if method == "exact":
        gaussian_tail(sigma)  # a width the MPC sampler builds, or a ConfigError before any message
    rotations = [int(r) for r in rotations]
    ctx = params.context
    primes = params.primes
    rows = list(range(len(primes)))
    n = params.n
    me, parties = engine.session.index, engine.session.n
    phases = Phases(engine, progress)

    auth = active(engine)

    def secret() -> SharedRows:
        return SharedRows.of(engine, engine.ternary((n,), primes)).ntt(ctx, rows)

    s = phases.run("secret key (ternary)", secret, n)

    contributed = auth and method == "local"  # each party's own error, proven in range in one anchor prime

    def open_contributed(base: SharedRows, count: int, what: str) -> np.ndarray:
        """base + e opened, e the sum of every party's own error (:func:`~.polys.open_with_errors`)."""
        bound = gaussian_bound(params.sigma)
        return open_with_errors(base, local_errors_coefficients(params, count), -bound, bound, factor=1,
                                to_form=ntt_copy(ctx, rows), from_form=ntt_copy(ctx, rows, inverse=True),
                                what=what)

    def errors(count: int) -> SharedRows | np.ndarray:
        if method == "local":  # each party's own error, added to this party's share (passive)
            return local_errors(params, count)
        e = SharedRows.of(engine, engine.gaussian(count * n, primes, sigma=sigma))  # (R, count n)
        e = SharedRows(engine, _split(e.share, count), None if e.mac is None else _split(e.mac, count), e.primes)
        return e.ntt(ctx, rows)

    def public_key() -> ckks.PublicKey:  # b = -a s + e
        seed = joint_seed(engine, "pk")
        a = expand_seed(params, seed, rows, 1)[0]
        if contributed:
            zero = np.zeros_like(a)
            b = open_contributed(s.map(lambda s_: public_key_share(params, s_, a, zero)), 1, "pk")
            return ckks.PublicKey(params, np.stack([b, a]), seed)
        e = errors(1)
        if isinstance(e, SharedRows):
            b = linear(lambda s_, e_: public_key_share(params, s_, a, e_[0]), s, e)
        else:  # the passive engine's local errors: this party's own, on its share
            b = s.map(lambda s_: public_key_share(params, s_, a, e[0]))
        return ckks.PublicKey(params, np.stack([b.open("pk"), a]), seed)

    public = phases.run("public key", public_key, n)

    def square() -> SharedRows:  # open d = s - alpha; s^2 = d^2 + 2 d alpha + alpha^2
        alpha, alpha2 = (SharedRows.of(engine, x) for x in engine.square_pairs(n, primes))
        d = linear(lambda s_, a_: ctx.sub(s_, a_, rows), s, alpha).open("s2-masked")
        s2 = linear(lambda a_, a2_: square_share(params, d, a_, a2_, False), alpha, alpha2)
        return s2.add_public(ctx.mul(d, d, rows))

    def switching(target: SharedRows, galois: int, what: str) -> ckks.SwitchingKey:
        digits = len(params.moduli)
        seed = joint_seed(engine, what)
        a = expand_seed(params, seed, rows, digits)
        if contributed:
            zero = np.zeros_like(a)
            opened = open_contributed(linear(lambda s_, t_: switching_key_share(params, s_, t_, a, zero), s, target),
                                      digits, what)
            return ckks.SwitchingKey(params, np.ascontiguousarray(np.stack([opened, a], axis=1)), galois, seed)
        e = errors(digits)
        if isinstance(e, SharedRows):
            b = linear(lambda s_, t_, e_: switching_key_share(params, s_, t_, a, e_), s, target, e)
        else:
            b = linear(lambda s_, t_: switching_key_share(params, s_, t_, a, e), s, target)
        opened = b.open(what)
        return ckks.SwitchingKey(params, np.ascontiguousarray(np.stack([opened, a], axis=1)), galois, seed)

    s2 = phases.run("s^2 (square pairs)", square, n * len(primes))
    relin = phases.run("relinearisation key", lambda: switching(s2, 0, "rlk"), n * len(params.moduli))
    elements = [ckks.galois_element(params, r) for r in rotations]
    if conjugation:
        elements.append(ckks.conjugation_element(params))
    galois: dict[int, ckks.SwitchingKey] = {}
    for g in dict.fromkeys(elements):
        galois[g] = phases.run(f"rotation key g={g}",
                               lambda g=g: switching(s.map(lambda x: ctx.automorph(x, g)), g, f"galois-{g}"),
                               n * len(params.moduli))
    macs = None if s.mac is None else AuthenticatedShare(engine.mac_keys(primes), s.mac)
    keys = JointKeys(params, public, relin, galois, ckks.SecretKeyShare(params, s.share, me, parties), phases.done,
                     ledger=Ledger(budget=int(budget), key_method=key_method(method, auth)), macs=macs)
    if check:
        phases.run("check (joint test decryption)",
                   lambda: check_joint_keys(engine, keys, rotations, conjugation))
    return keys


def check_joint_keys(engine: Any, keys: JointKeys, rotations: list[int], conjugation: bool) -> None:
    """Encrypts a jointly drawn test vector under the opened public key, squares it (relinearisation
    key) and sums its rotations (every rotation key), decrypts both jointly and compares; raises
    :class:`~shaper.errors.KeyValidationError` for a key that fails. Every party computes the
    check's ciphertexts itself from the joint seed, so each accounts for them (with their
    worst-case bounds) like any agreed evaluation, and the two decryptions come out of the budget."""
    params = keys.params
    prg = Prg(joint_seed(engine, "check"))
    nm = noise_model(keys)
    fresh = nm.public_encryption(params.max_level, params.scale, 1.0)
    for what, c, expected in check_vectors(params, keys.public, keys.evaluator(), prg, rotations, conjugation):
        if what == "relinearisation key":
            bound = nm.rescale(nm.relinearize(nm.square(fresh)))
        else:
            parts = [nm.rotate(fresh) for _ in dict.fromkeys(rotations)] + ([nm.conjugate(fresh)] if conjugation else [])
            bound = parts[0]
            for b in parts[1:]:
                bound = nm.add(bound, b)
        keys.ledger.record([c], [bound], kind="output", source=f"key check: {what}")
        flood = plan_flood(keys, [c])
        got = decrypt(engine, keys, c)
        err = float(np.max(np.abs(got - expected)))
        if not err < check_bound(flood.precision_bits, len(rotations) + conjugation) + float(nm.slot_error(bound)):
            raise KeyValidationError(f"the jointly generated {what} fails its test decryption (error {err:.3g})")


def key_method(method: str, authenticated: bool) -> str:
    """The key's error law as the noise model knows it: "exact" (MPC Gaussians), "local" (each
    party's own, on the passive engine) or "contributed" (each party's own as a range-checked
    input on the active engine: a deviating party's is any values within the range)."""
    return "contributed" if method == "local" and authenticated else method


def _split(rows: np.ndarray, count: int) -> np.ndarray:
    """(..., R, count N) rows of ``count`` polynomials side by side as (..., count, R, N)."""
    *lead, r, width = rows.shape
    return np.ascontiguousarray(np.moveaxis(rows.reshape(*lead, r, count, width // count), -2, -3))
