"""Joint decryption under a threshold CKKS key: only what every party can account for, flooded
by the worst case, within the key's budget.

Every party calls :func:`decrypt_many` with its own keys (share and :class:`~.ledger.Ledger`)
and its own copy of the ciphertexts. Then:

1. **Accounting.** Each party looks every ciphertext up in its own ledger: it must be a joint
   input (:func:`~.inputs.encrypt_jointly`) or the output of an evaluation this party ran itself
   (:func:`~.evaluation.evaluate`). A ciphertext of unknown provenance — encrypted by one party
   alone, computed by one party alone, crafted — is refused. The ledger gives its worst-case
   error bound E.
2. **Consent.** Each party sends the request it would answer — the 64-hex digests, the
   recipient, the flood width, mode and lambda, the key's budget — and whether it consents
   (accounted, budget left, ``approve(request)``). Unless every request is the same and every
   party consents, every party raises :class:`~shaper.errors.DecryptionRefused` naming who
   refused and why; nothing but the requests has been sent.
3. **Budget.** Each party charges the decryptions to its ledger, on disk, before opening.
4. **Opening.** Party i sends c_1 s_i + f_i on limb q_0 (party 0 adds c_0), f_i its own Gaussian
   flood of width sigma_f (:func:`~shaper.crypto.ckks.multiparty.flood_sigma`: from E, the budget
   Q and lambda; the argument is there and in docs/threshold-ckks.md), to the recipient only (or
   to every party). The recipient decodes m + e + sum_i f_i.

Security: the recipient and any coalition of up to n - 1 parties learn the results; what the
errors carry of s is hidden by the honest party's flood alone (``key-recovery`` mode: the key is
recovered with probability at most 2^-lambda over the whole budget; ``statistical`` mode: the
view is 2^-lambda close to one that shows only the results). The argument needs E to bound the
error of *every* decrypted ciphertext, whatever the parties chose to encrypt and compute: that is
what the accounting buys. A party that deviates inside the protocol (sends a wrong share) can
make the result wrong, not learn more.

**On the active engine** (a key with MAC shares): the opening is c_0 + c_1 [s] + [f] on
authenticated shares, [f] the sum of every party's flood, each a range-checked input within
:func:`flood_reach`; MAC-checked, and to one recipient masked by its own input mask, so a wrong
share aborts before the recipient unmasks anything. The precision in :class:`Flood` is then the
worst case over what n - 1 deviating floods can add within their range. The floods can be made
ahead (:func:`prepare_floods`): the decryption then only opens.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...crypto import ckks
from ...crypto.ckks.multiparty import (
    FLOOD_MODES,
    KAPPA,
    SECURITY_LAMBDA,
    WORK_BITS,
    check_flood_fits,
    ciphertext_digest,
    decode_opened,
    decryption_precision,
    decryption_share,
    flood_sigma,
    sample_flood,
    validate_ciphertexts,
)
from ...errors import ConfigError, DecryptionRefused
from .commit import committed_open_rows
from .polys import SharedRows, active, contributed, linear, open_rows

__all__ = ["FLOOD_REACH", "Flood", "FloodPolicy", "agree", "consent", "decrypt", "decrypt_many", "flood_reach", "plan_flood",
           "prepare_floods", "prepared_floods"]

#: a flood's reach in sigmas (the Box-Muller sampler's largest value, sqrt(2 * 53 ln 2) = 8.57)
FLOOD_REACH = 8.6


@dataclass(frozen=True)
class FloodPolicy:
    """How wide the flood is: ``mode`` "key-recovery" (default) or "statistical", the
    statistical security parameter ``lam`` (>= 40) and, for key recovery, the attacker's work in
    bits (``work``, default 64: the argument holds against 2^64 operations). Every party must use
    the same policy."""

    mode: str = "key-recovery"
    lam: int = SECURITY_LAMBDA
    work: int = WORK_BITS

    def __post_init__(self) -> None:
        if self.mode not in FLOOD_MODES:
            raise ConfigError(f"flood mode must be one of {', '.join(FLOOD_MODES)}, got {self.mode!r}")
        if not isinstance(self.lam, int) or self.lam < 40:
            raise ConfigError(f"lambda must be an integer of at least 40, got {self.lam!r}")
        if not isinstance(self.work, int) or not 0 <= self.work < KAPPA - self.lam:
            raise ConfigError(f"the attacker's work must be 0 .. {KAPPA - self.lam - 1} bits (kappa {KAPPA} - lambda), "
                              f"got {self.work!r}")


@dataclass(frozen=True)
class Flood:
    """The flood of one joint decryption as every party computes it: the worst-case error bound
    E of the ciphertexts, the budget Q, the width sigma_f each party adds, and the bits of slot
    precision left at the ciphertexts' scale (:func:`plan_flood`)."""

    error_bound: float
    message_bound: float
    budget: int
    sigma: float
    precision_bits: float
    policy: FloodPolicy

    def request(self) -> dict[str, Any]:
        return {"sigma_bits": round(math.log2(self.sigma), 9), "mode": self.policy.mode, "lambda": self.policy.lam,
                "work": self.policy.work, "budget": self.budget}


def plan_flood(keys: Any, cts: Sequence[ckks.Ciphertext], policy: FloodPolicy = FloodPolicy(), *,
               checked: bool | None = None) -> Flood:
    """The flood this party would use for ``cts``: E and the message bound from its ledger
    (raises :class:`~shaper.errors.DecryptionRefused` for a ciphertext it cannot account for),
    sigma_f from E, the key's budget and the policy; raises :class:`~shaper.errors.ConfigError`
    when the flood would take more than an eighth of q_0. ``checked`` (default: whether the key
    has MAC shares, i.e. was made on the active engine): every flood is a range-checked input
    of the active engine, and the precision is what n - 1 deviating floods leave at worst."""
    params = keys.params
    cts = validate_ciphertexts(params, cts)
    entries = keys.ledger.accounted(cts)
    error = max(e.error for e in entries)
    message = max(e.message for e in entries)
    sigma = flood_sigma(error, keys.ledger.budget, mode=policy.mode, lam=policy.lam, work=policy.work)
    parties = keys.share.parties
    checked = getattr(keys, "macs", None) is not None if checked is None else checked
    reach = flood_reach(sigma) if checked else None
    check_flood_fits(params, sigma, parties, reach=reach)
    precision = min(decryption_precision(params, ct.scale, sigma, parties, reach=reach) for ct in cts)
    return Flood(error, message, keys.ledger.budget, sigma, precision, policy)


def decrypt(engine: Any, keys: Any, ct: ckks.Ciphertext, *, to: int | None = None,
            approve: Callable[[dict], bool] | None = None, policy: FloodPolicy = FloodPolicy()) -> np.ndarray | None:
    """Joint decryption of one accounted ciphertext to party ``to`` (every party when None):
    the decoded slots there, None elsewhere. See :func:`decrypt_many`."""
    out = decrypt_many(engine, keys, [ct], to=to, approve=approve, policy=policy)
    return None if out is None else out[0]


def decrypt_many(engine: Any, keys: Any, cts: Sequence[ckks.Ciphertext], *, to: int | None = None,
                 approve: Callable[[dict], bool] | None = None,
                 policy: FloodPolicy = FloodPolicy()) -> np.ndarray | None:
    """Joint decryption of accounted ciphertexts in one consent round and one opening:
    (len(cts), slots) decoded values at party ``to`` (every party when None), None elsewhere.

    ``keys`` is this party's :class:`~.keystore.JointKeys` (its share and ledger). ``approve``
    sees the request (digests, recipient, flood) and may refuse it. Raises
    :class:`~shaper.errors.DecryptionRefused` at every party unless every party accounts for
    every ciphertext, has budget left, agrees on the request and consents (module docstring)."""
    params = keys.params
    cts = validate_ciphertexts(params, cts)
    session = engine.session
    if to is not None and not (isinstance(to, int) and 0 <= to < session.n):
        raise ConfigError(f"decryption recipient {to!r} is not a party index 0..{session.n - 1}")
    digests = [ciphertext_digest(ct) for ct in cts]
    request: dict[str, Any] | None = None
    reason = ""
    try:
        flood = plan_flood(keys, cts, policy, checked=active(engine))
        keys.ledger.check_budget(len(cts))
        request = {"digests": digests, "to": to, **flood.request()}
        if approve is not None and not approve(dict(request)):
            reason = "not approved"
    except (DecryptionRefused, ConfigError) as exc:
        reason = str(exc)
    if request is None:
        request = {"digests": digests, "to": to}
    agree(session, request, reason)
    keys.ledger.spend(len(cts))
    f = sample_flood((len(cts), params.n), flood.sigma)
    if active(engine):
        opened = _open_authenticated(engine, keys, cts, f, flood.sigma, to)
        return None if opened is None else decode_opened(params, opened, cts)
    shares = decryption_share(keys.share, cts, f)
    if to is None:  # opened to every party: committed first, so that no party sets the result by sending last
        opened = committed_open_rows(engine, shares, (params.moduli[0],), what="decryption", error=DecryptionRefused)
    else:
        opened = open_rows(engine, shares, (params.moduli[0],), to)
    return None if opened is None else decode_opened(params, opened, cts)


def flood_reach(sigma: float) -> int:
    """The largest |value| a flood of width sigma takes (:func:`~shaper.crypto.ckks.multiparty.sample_flood`:
    Box-Muller on 53-bit uniforms reaches sqrt(2 * 53 ln 2) sigma < 8.6 sigma): the range each
    party's flood is checked against on the active engine."""
    return int(math.ceil(FLOOD_REACH * float(sigma)))


def _open_authenticated(engine: Any, keys: Any, cts: list[ckks.Ciphertext], flood: np.ndarray, sigma: float,
                        to: int | None) -> np.ndarray | None:
    """The decryption on the active engine: c_0 + c_1 [s] + [f] on limb q_0, opened with the MAC
    check (to ``to`` alone: masked by an input mask of the recipient's, which then knows its
    value was checked). [f] is the sum of every party's own flood, each a range-checked input
    within :func:`flood_reach` (a deviating party's is any values in that range, which
    :func:`plan_flood` counts at their worst case); [s] the key's share with its MAC shares."""
    params = keys.params
    ctx = params.context
    q0 = params.moduli[0]
    s0 = keys.secret(engine).rows([0])
    f = _take_floods(engine, params, sigma, len(cts))
    if f is None:
        reach = flood_reach(sigma)
        f = contributed(engine, flood, -reach, reach, modulus=q0).ntt(ctx, [0])  # (count, 1, N)
    c1 = np.ascontiguousarray(np.stack([ct.data[1, :1] for ct in cts]))
    c0 = np.ascontiguousarray(np.stack([ct.data[0, :1] for ct in cts]))
    d = linear(lambda s_, f_: ctx.add(ctx.mul(c1, np.ascontiguousarray(np.broadcast_to(s_, c1.shape)), [0]), f_, [0]),
               s0, f).add_public(c0)
    return d.open("decryption", to)


def prepare_floods(engine: Any, keys: Any, count: int, cts: Sequence[ckks.Ciphertext] | None = None, *,
                   sigma: float | None = None, policy: FloodPolicy = FloodPolicy()) -> Flood | None:
    """Make the floods of ``count`` later decryptions now, on the active engine: every party's
    flood for each, a range-checked input within :func:`flood_reach` as in a decryption, in one
    batch (so the proofs share their pool runs and rounds), held by the engine. A later
    decryption whose flood has the same width takes them in order instead of making its own,
    and then only opens c_0 + c_1 [s] + [f] with the MAC check. Every party calls this alike.

    The width: ``sigma``, or the flood :func:`plan_flood` gives for ``cts`` (ciphertexts like
    the ones to be decrypted: the same ledger bound), returned. A deviating party's flood is
    bound to its range when it is made, before any ciphertext it would be used on exists; the
    honest party's is its own fresh Gaussian, used once. Nothing is decrypted or charged to the
    ledger here. On the passive engine there is nothing to check, and this does nothing."""
    if not active(engine):
        return None
    if not isinstance(count, int) or count < 1:
        raise ConfigError(f"the floods to make ahead must be a positive count, got {count!r}")
    plan = None
    if sigma is None:
        if not cts:
            raise ConfigError("prepare_floods needs the flood's width: sigma= or ciphertexts like the ones to decrypt")
        plan = plan_flood(keys, cts, policy, checked=True)
        sigma = plan.sigma
    params = keys.params
    reach = flood_reach(sigma)
    check_flood_fits(params, sigma, keys.share.parties, reach=reach)
    keys.secret(engine)  # the key's MAC keys into the engine before it authenticates anything on its primes
    f = contributed(engine, sample_flood((count, params.n), sigma), -reach, reach,
                    modulus=params.moduli[0]).ntt(params.context, [0])
    engine.reserved.setdefault(("tckks-flood", params.moduli[0], params.n, reach), []).append(f)
    return plan


def prepared_floods(engine: Any, keys: Any, sigma: float) -> int:
    """How many floods of width ``sigma`` the engine holds for ``keys``' decryptions."""
    held = getattr(engine, "reserved", {}).get(("tckks-flood", keys.params.moduli[0], keys.params.n,
                                                flood_reach(sigma)), [])
    return sum(len(f.share) for f in held)


def _take_floods(engine: Any, params: Any, sigma: float, count: int) -> SharedRows | None:
    """``count`` floods made ahead (:func:`prepare_floods`), or None when fewer are held (every
    party decides alike: they hold the same)."""
    held = getattr(engine, "reserved", {}).get(("tckks-flood", params.moduli[0], params.n, flood_reach(sigma)))
    if not held or sum(len(f.share) for f in held) < count:
        return None
    parts = []
    while count:
        f = held[0]
        step = min(count, len(f.share))
        parts.append(SharedRows(engine, f.share[:step], f.mac[:, :step], f.primes))
        if step == len(f.share):
            held.pop(0)
        else:
            held[0] = SharedRows(engine, f.share[step:], f.mac[:, step:], f.primes)
        count -= step
    if len(parts) == 1:
        return parts[0]
    return SharedRows(engine, np.concatenate([p.share for p in parts]), np.concatenate([p.mac for p in parts], axis=1),
                      parts[0].primes)


def consent(session: Any, keys: Any, count: int, request: dict, *, tag: str,
            approve: Callable[[dict], bool] | None = None, prepare: Callable[[], None] | None = None) -> None:
    """This party's side of a decryption's consent (threshold CKKS's and BGV's): ``prepare()``
    (its accounting; it may add to ``request``), the key's budget for ``count`` decryptions and
    ``approve(request)``, any refusal becoming this party's reason; then :func:`agree` and, once
    every party consents, the budget charged on disk before anything is opened."""
    reason = ""
    try:
        if prepare is not None:
            prepare()
        keys.ledger.check_budget(count)
        if approve is not None and not approve(dict(request)):
            reason = "not approved"
    except (DecryptionRefused, ConfigError) as exc:
        reason = str(exc)
    agree(session, request, reason, tag=tag)
    keys.ledger.spend(count)


def agree(session: Any, request: dict, reason: str, tag: str = "tckks-decrypt") -> None:
    """The consent round (threshold CKKS's and BGV's): every party's request, consent and reason
    to every other; raises :class:`~shaper.errors.DecryptionRefused` at every party unless all
    agree and consent. ``reason``: why this party refuses ("" when it consents)."""
    session.broadcast({"request": request, "consent": not reason, "reason": reason[:500]}, tag=tag)
    answers = session.gather(tag=tag)
    refused = [(session.name, reason)] if reason else []
    for name, a in answers.items():
        if not isinstance(a, dict):
            raise DecryptionRefused(f"party {name!r} sent a malformed decryption answer")
        if a.get("consent") is not True:
            refused.append((name, str(a.get("reason", ""))[:500] or "refused"))
        elif a.get("request") != request and not reason:
            raise DecryptionRefused(f"party {name!r} answered a different decryption request "
                                    f"({_short(a.get('request'))}; ours {_short(request)})")
    if refused:
        what = (f"ciphertext {request['digests'][0][:16]}..." if len(request["digests"]) == 1
                else f"{len(request['digests'])} ciphertexts")
        raise DecryptionRefused(f"decryption of {what} refused by "
                                + "; ".join(f"{name} ({why})" for name, why in refused))


def _short(request: Any) -> Any:
    """A request for an error message: the digests shortened to their count and first one."""
    if isinstance(request, dict) and isinstance(request.get("digests"), list):
        d = request["digests"]
        return {**request, "digests": f"[{len(d)} digests, first {str(d[0])[:16] if d else ''}...]"}
    return request

