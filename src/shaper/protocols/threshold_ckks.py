"""Threshold CKKS by MPC key generation (GMPFHE): n parties generate the keys of ordinary
single-key RNS-CKKS inside the n-party MPC engine, anyone computes with them, and the parties
decrypt jointly.

Security model: passive (semi-honest) parties, dishonest majority (any n - 1 may collude), as
the engine (:class:`~shaper.protocols.nparty.AdditiveNPC`). What each party learns:

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

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..crypto import ckks
from ..crypto.ckks.keys import expand_seed, sample_gaussian, small_to_rns
from ..crypto.prg import Prg
from ..errors import (
    ConfigError,
    DecryptionRefused,
    KeyMismatchError,
    KeyValidationError,
)

#: key generation methods: the paper's (errors sampled in MPC) and the local-noise variant
METHODS = ("exact", "local")
#: smudging bits for threshold decryption: r uniform in [-2^(k-1), 2^(k-1)) per coefficient.
#: 25 keeps 20 bits of slot precision at the CNN's scale 2^53 with N = 2^14 (docs/threshold-ckks.md)
SMUDGE_BITS = 25
#: coefficients whose smudging noise is sampled per edaBits call in a batch decryption
SMUDGE_CHUNK = 1 << 16
SHARE_FILE = "secret-share.shpr"
#: the benchmark CNN's parameters (issue 19, GMPFHE): N = 2^14, q = 60 + 6 x 53 bits, p 60 bits, scale 2^53
CNN_CHAIN = (1 << 14, (60, 53, 53, 53, 53, 53, 53), 60, 53)
#: the rotation steps of the CNN's packing plan (docs/cnn.md; ``shaper.ml.cnn.plan.rotation_steps``
#: derives the same 28 from the plan, which the tests check). The E2DM packing of the research
#: notes needs 23 of them; folding its FC-2 mask into the weights adds -3, -5, -6, -7, -9.
CNN_ROTATIONS = (1, 2, 4, 8, 14, 15, 16, 32, 64, 128, 256, 384, 512, 640, 768, 896, 1024, 2048, 4096,
                 -1, -2, -3, -4, -5, -6, -7, -8, -9)
Progress = Callable[[dict], None]


@dataclass
class Phase:
    """Time and traffic of one key-generation phase at this party (bytes it sent)."""

    name: str
    seconds: float
    bytes_sent: int
    items: int = 0


@dataclass(eq=False)
class PublicKeys:
    """The opened keys: what anyone may hold to encrypt and compute (no secret in it)."""

    params: ckks.Parameters
    public: ckks.PublicKey
    relin: ckks.SwitchingKey
    galois: dict[int, ckks.SwitchingKey]

    def evaluator(self) -> ckks.Evaluator:
        return ckks.Evaluator(self.params, self.relin, self.galois)

    def sizes(self) -> dict[str, int]:
        """Serialised bytes of each key (independent of the number of parties)."""
        out = {"public key": len(ckks.to_bytes(self.public)), "relinearisation key": len(ckks.to_bytes(self.relin))}
        if self.galois:
            out["rotation keys"] = sum(len(ckks.to_bytes(k)) for k in self.galois.values())
        return out

    def save(self, directory: str | os.PathLike, share: ckks.SecretKeyShare | None = None) -> Path:
        """Writes the keys (and a party's ``share``, mode 0600) as a new directory, atomically:
        everything goes to a temporary sibling first, renamed into place only once complete, so a
        failure leaves nothing behind. Refuses to overwrite an existing directory."""
        target = Path(directory)
        if target.exists():
            raise ConfigError(f"{target} exists already; key directories are never overwritten")
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-", dir=target.parent))
        try:
            ckks.save(self.params, tmp / "params.shpr")
            ckks.save(self.public, tmp / "public.shpr")
            ckks.save(self.relin, tmp / "relin.shpr")
            for g, key in sorted(self.galois.items()):
                ckks.save(key, tmp / f"galois-{g}.shpr")
            if share is not None:
                ckks.save(share, tmp / SHARE_FILE)
            os.rename(tmp, target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return target

    @classmethod
    def load(cls, directory: str | os.PathLike) -> PublicKeys:
        """The public material of a key directory (never reads the share)."""
        d = Path(directory)
        if not (d / "params.shpr").is_file():
            raise ConfigError(f"{d} is not a threshold-CKKS key directory (no params.shpr)")
        params = ckks.load(d / "params.shpr")
        galois = {}
        for f in sorted(d.glob("galois-*.shpr")):
            key = ckks.load(f, params)
            if not isinstance(key, ckks.SwitchingKey) or f.name != f"galois-{key.galois}.shpr":
                raise KeyValidationError(f"{f} does not hold the rotation key its name says")
            galois[key.galois] = key
        public, relin = ckks.load(d / "public.shpr", params), ckks.load(d / "relin.shpr", params)
        if not isinstance(public, ckks.PublicKey) or not isinstance(relin, ckks.SwitchingKey) or relin.galois != 0:
            raise KeyValidationError(f"{d}: public.shpr / relin.shpr do not hold a public and a relinearisation key")
        return cls(params, public, relin, galois)


@dataclass(eq=False)
class JointKeys(PublicKeys):
    """What key generation leaves with every party: the opened keys, its own share, and the
    time and traffic of each phase at this party."""

    share: ckks.SecretKeyShare = field(default=None)  # type: ignore[assignment]
    phases: list[Phase] = field(default_factory=list)

    def save(self, directory: str | os.PathLike, share: ckks.SecretKeyShare | None = None) -> Path:
        return super().save(directory, share or self.share)

    @classmethod
    def load(cls, directory: str | os.PathLike) -> JointKeys:
        """A party's key directory: the public material and its share."""
        pub = PublicKeys.load(directory)
        path = Path(directory) / SHARE_FILE
        if not path.is_file():
            raise ConfigError(f"{directory} holds no secret-key share ({SHARE_FILE}): it is public material only")
        share = ckks.load(path, pub.params)
        if not isinstance(share, ckks.SecretKeyShare):
            raise KeyValidationError(f"{path} is not a secret-key share")
        return cls(pub.params, pub.public, pub.relin, pub.galois, share)


def cnn_parameters() -> ckks.Parameters:
    """The CNN's CKKS parameters (128-bit secure by the HE standard)."""
    n, q, p, scale = CNN_CHAIN
    return ckks.Parameters.from_literal(n, list(q), p, scale)


# -- helpers ------------------------------------------------------------------------------------

def _rows(x: Any) -> np.ndarray:
    """ModShares (N, R) -> this party's share as kernel rows (R, N)."""
    return np.ascontiguousarray(x.share.T)


def _open(engine: Any, rows: np.ndarray, primes: tuple[int, ...], to: int | None = None) -> np.ndarray | None:
    """Opens shares held as kernel rows (..., R, N) to every party (or to ``to``)."""
    from .nparty import ModShares

    moved = np.moveaxis(rows, -2, -1)  # limbs last, as the engine holds them
    out = ModShares(engine, np.ascontiguousarray(moved), primes).reveal(to)
    return None if out is None else np.ascontiguousarray(np.moveaxis(out, -1, -2))


def _joint_seed(engine: Any, what: str) -> bytes:
    """A 32-byte seed no party chose alone: opened uniform shares, hashed."""
    r = engine.random_mod((4,), ((1 << 61) - 1,)).reveal()
    return hashlib.sha256(b"shaper-threshold-ckks/" + what.encode() + np.asarray(r, dtype="<u8").tobytes()).digest()


class _Phases:
    """Times each phase and counts this party's bytes sent; reports to ``progress``."""

    def __init__(self, engine: Any, progress: Progress | None) -> None:
        self.stats = engine.session.stats
        self.progress = progress
        self.done: list[Phase] = []

    def run(self, name: str, fn: Callable[[], Any], items: int = 0) -> Any:
        if self.progress:
            self.progress({"event": "phase", "phase": name, "status": "start"})
        t0, b0 = time.perf_counter(), self.stats.bytes_sent
        out = fn()
        phase = Phase(name, time.perf_counter() - t0, self.stats.bytes_sent - b0, items)
        self.done.append(phase)
        if self.progress:
            self.progress({"event": "phase", "phase": name, "status": "done", "seconds": phase.seconds,
                           "bytes": phase.bytes_sent, "items": items})
        return out


# -- key generation -----------------------------------------------------------------------------

def keygen(engine: Any, params: ckks.Parameters, *, rotations: Iterable[int] = (), conjugation: bool = False,
           method: str = "exact", check: bool = True, progress: Progress | None = None) -> JointKeys:
    """Generates single-key CKKS keys inside the MPC; every party calls this with its engine.

    The secret s is a shared uniform ternary polynomial; s^2 is computed per NTT point and limb
    with square pairs; s(X^g) is local on the shares; the uniform ``a`` polynomials come from
    jointly drawn seeds. ``method`` "exact" samples every error (sigma 3.2) in the MPC, "local"
    lets each party add its own (module docstring). The public, relinearisation and rotation
    keys are opened; with ``check`` a jointly chosen test vector is encrypted, multiplied,
    rotated and jointly decrypted, and a key that does not work raises
    :class:`~shaper.errors.KeyValidationError`. ``progress`` gets one event per phase start and
    end (time, bytes this party sent)."""
    if method not in METHODS:
        raise ConfigError(f"unknown key-generation method {method!r}; choose from {', '.join(METHODS)}")
    rotations = [int(r) for r in rotations]
    ctx = params.context
    primes = params.primes
    rows = list(range(len(primes)))
    n = params.n
    me, parties = engine.session.index, engine.session.n
    phases = _Phases(engine, progress)

    def secret() -> np.ndarray:
        s = _rows(engine.ternary((n,), primes))
        ctx.ntt(s, rows)
        return s

    s = phases.run("secret key (ternary)", secret, n)

    def errors(count: int) -> np.ndarray:
        if method == "local":  # this party's own error, added to its share
            return small_to_rns(params, sample_gaussian((count, n), params.sigma), rows)
        e = engine.gaussian(count * n, primes).share.reshape(count, n, len(primes))
        out = np.ascontiguousarray(np.swapaxes(e, 1, 2))  # (count, R, N)
        ctx.ntt(out, rows)
        return out

    def public_key() -> ckks.PublicKey:  # b = -a s + e
        seed = _joint_seed(engine, "pk")
        a = expand_seed(params, seed, rows, 1)[0]
        b = ctx.sub(errors(1)[0], ctx.mul(a, s, rows), rows)
        return ckks.PublicKey(params, np.stack([_open(engine, b, primes), a]), seed)

    public = phases.run("public key", public_key, n)

    def square() -> np.ndarray:  # open d = s - alpha; s^2 = d^2 + 2 d alpha + alpha^2
        alpha, alpha2 = engine.square_pairs(n, primes)
        alpha, alpha2 = _rows(alpha), _rows(alpha2)
        d = _open(engine, ctx.sub(s, alpha, rows), primes)
        s2 = ctx.add(ctx.mul(ctx.add(d, d, rows), alpha, rows), alpha2, rows)
        return ctx.add(s2, ctx.mul(d, d, rows), rows) if me == 0 else s2

    def switching(target: np.ndarray, galois: int, what: str) -> ckks.SwitchingKey:
        digits = len(params.moduli)
        seed = _joint_seed(engine, what)
        a = expand_seed(params, seed, rows, digits)
        b = ctx.sub(errors(digits), ctx.mul(a, np.ascontiguousarray(np.broadcast_to(s, a.shape)), rows), rows)
        for j, q in enumerate(params.moduli):  # + [row = j] (p mod q_j) t on the shares
            term = ctx.mul_scalar(np.ascontiguousarray(target[j:j + 1]), np.array([params.special % q], dtype=np.uint64), [j])
            b[j, j:j + 1] = ctx.add(np.ascontiguousarray(b[j, j:j + 1]), term, [j])
        return ckks.SwitchingKey(params, np.ascontiguousarray(np.stack([_open(engine, b, primes), a], axis=1)), galois, seed)

    s2 = phases.run("s^2 (square pairs)", square, n * len(primes))
    relin = phases.run("relinearisation key", lambda: switching(s2, 0, "rlk"), n * len(params.moduli))
    elements = [ckks.galois_element(params, r) for r in rotations]
    if conjugation:
        elements.append(ckks.conjugation_element(params))
    galois: dict[int, ckks.SwitchingKey] = {}
    for g in dict.fromkeys(elements):
        galois[g] = phases.run(f"rotation key g={g}", lambda g=g: switching(ctx.automorph(s, g), g, f"galois-{g}"),
                               n * len(params.moduli))
    keys = JointKeys(params, public, relin, galois, ckks.SecretKeyShare(params, s, me, parties), phases.done)
    if check:
        phases.run("check (joint test decryption)", lambda: _check(engine, keys, rotations, conjugation))
    return keys


def _check(engine: Any, keys: JointKeys, rotations: list[int], conjugation: bool) -> None:
    """Encrypts a jointly drawn test vector under the opened public key, squares it (relinearisation
    key) and sums its rotations (every rotation key), decrypts both jointly and compares."""
    params = keys.params
    prg = Prg(_joint_seed(engine, "check"))
    x = (prg.below(1 << 20, params.slots).astype(np.float64) / (1 << 19)) - 1.0
    enc, ev = ckks.Encoder(params), keys.evaluator()
    ct = ckks.encrypt(keys.public, enc.encode(x), prg)
    tests = [("relinearisation key", ev.mul_rescale(ct, ct), x * x)] if params.max_level >= 1 else []
    if keys.galois:
        acc, want = None, np.zeros(params.slots, dtype=np.complex128)
        for r in dict.fromkeys(rotations):
            acc = ev.rotate(ct, r) if acc is None else ev.add(acc, ev.rotate(ct, r))
            want = want + np.roll(x, -r)
        if conjugation:
            acc = ev.conjugate(ct) if acc is None else ev.add(acc, ev.conjugate(ct))
            want = want + x
        tests.append(("rotation keys", acc, want))
    for what, c, expected in tests:
        got = decrypt(engine, keys.share, c)
        err = float(np.max(np.abs(got - expected)))
        bound = (1e-3 + 2.0 ** -decryption_precision(params, c.scale)) * max(1, len(rotations) + conjugation)
        if not err < bound:
            raise KeyValidationError(f"the jointly generated {what} fails its test decryption (error {err:.3g})")


# -- decryption ---------------------------------------------------------------------------------

def ciphertext_digest(ct: ckks.Ciphertext) -> str:
    """SHA-256 of the ciphertext's canonical serialisation (hex): what a decryption request names."""
    return hashlib.sha256(ckks.to_bytes(ct)).hexdigest()


def decryption_precision(params: ckks.Parameters, scale: float, smudge_bits: int = SMUDGE_BITS) -> float:
    """Expected bits of precision (-log2 of the largest slot error over all slots) that smudging
    leaves at ``scale``: the coefficient noise (std 2^k / sqrt 12) spreads over N/2 complex slots
    with std 2^k sqrt(N / 24) / scale; the largest of N/2 is about 4.5 std."""
    std = 2.0 ** smudge_bits * np.sqrt(params.n / 24.0) / float(scale)
    return float(-np.log2(4.5 * std))


def decrypt(engine: Any, share: ckks.SecretKeyShare, ct: ckks.Ciphertext, *, to: int | None = None,
            smudge_bits: int = SMUDGE_BITS, approve: Callable[[dict], bool] | None = None) -> np.ndarray | None:
    """Joint decryption of ``ct`` to party ``to`` (every party when None): the decoded slots
    there, None elsewhere. Every party calls it with its own copy of the ciphertext.

    First every party sends the request it is answering (the ciphertext's digest, the
    recipient, the smudging width) and whether it consents (``approve(request)``, default yes);
    unless all requests agree and all consent, every party raises
    :class:`~shaper.errors.DecryptionRefused` and nothing is opened. Then the smudging noise is
    sampled jointly and each party sends its share of c_0 + c_1 s + r on limb q_0."""
    out = decrypt_many(engine, share, [ct], to=to, smudge_bits=smudge_bits, approve=approve)
    return None if out is None else out[0]


def decrypt_many(engine: Any, share: ckks.SecretKeyShare, cts: Sequence[ckks.Ciphertext], *, to: int | None = None,
                 smudge_bits: int = SMUDGE_BITS, approve: Callable[[dict], bool] | None = None) -> np.ndarray | None:
    """:func:`decrypt` of many ciphertexts in one consent round, one smudging draw and one
    opening: (len(cts), slots) decoded values at party ``to`` (every party when None), None
    elsewhere. The request names every ciphertext's digest, in order."""
    cts = list(cts)
    if not cts:
        raise ValueError("decrypt_many needs at least one ciphertext")
    params = share.params
    for k, ct in enumerate(cts):
        if not isinstance(ct, ckks.Ciphertext):
            raise TypeError(f"ciphertext {k} is a {type(ct).__name__}, not a ckks.Ciphertext")
        if ct.params != params:
            raise KeyMismatchError(f"ciphertext {k} belongs to other parameters than the key share")
        if ct.size != 2:
            raise ValueError(f"ciphertext {k}: threshold decryption takes relinearised (2-component) ciphertexts")
    if not 8 <= smudge_bits <= 58:
        raise ConfigError(f"smudge_bits must be 8..58, got {smudge_bits}")
    session = engine.session
    if to is not None and not 0 <= to < session.n:
        raise ConfigError(f"decryption recipient {to} is not a party index 0..{session.n - 1}")
    digests = [ciphertext_digest(ct) for ct in cts]
    request = {"digest": digests[0] if len(cts) == 1 else digests, "to": to, "smudge_bits": int(smudge_bits)}
    consent = bool(approve(dict(request))) if approve is not None else True
    session.broadcast({"request": request, "consent": consent}, tag="tckks-decrypt")
    answers = session.gather(tag="tckks-decrypt")
    for name, a in answers.items():
        if not isinstance(a, dict) or a.get("request") != request:
            theirs = a.get("request") if isinstance(a, dict) else a
            raise DecryptionRefused(f"party {name!r} answered a different decryption request "
                                    f"({_short(theirs)}; ours {_short(request)})")
    refused = sorted(name for name, a in answers.items() if a.get("consent") is not True)
    if not consent:
        refused.insert(0, session.name)
    if refused:
        what = f"ciphertext {digests[0][:16]}..." if len(cts) == 1 else f"{len(cts)} ciphertexts"
        raise DecryptionRefused(f"decryption of {what} refused by {', '.join(refused)}")

    ctx = params.context
    q0, n, m = params.moduli[0], params.n, len(cts)
    # r < 2^k jointly (minus 2^(k-1) centres it), in chunks of SMUDGE_CHUNK coefficients: the
    # bit planes of one chunk stay in cache (one call for a batch of 20 ciphertexts took 2.2x the
    # CPU per ciphertext of a single decryption)
    total = m * n
    parts = [engine.edabits(min(SMUDGE_CHUNK, total - at), smudge_bits, (q0,))[1].share
             for at in range(0, total, SMUDGE_CHUNK)]
    smudge = np.ascontiguousarray(np.concatenate(parts).T).reshape(m, 1, n)
    if share.index == 0:
        offset = ctx.from_signed(np.full(n, -(1 << (smudge_bits - 1)), dtype=np.int64), [0])
        smudge = ctx.add(smudge, np.broadcast_to(offset, smudge.shape).copy(), [0])
    ctx.ntt(smudge, [0])
    c1 = np.ascontiguousarray(np.stack([ct.data[1, :1] for ct in cts]))
    s0 = np.ascontiguousarray(np.broadcast_to(share.ntt[:1], c1.shape))
    part = ctx.add(ctx.mul(c1, s0, [0]), smudge, [0])
    if share.index == 0:
        part = ctx.add(part, np.ascontiguousarray(np.stack([ct.data[0, :1] for ct in cts])), [0])
    total = _open(engine, part, (q0,), to)
    if total is None:
        return None
    encoder = ckks.Encoder(params)
    return np.stack([encoder.decode(ckks.Plaintext(params, np.ascontiguousarray(total[k]), ct.scale))
                     for k, ct in enumerate(cts)])


def _short(request: Any) -> Any:
    """A request for an error message: a list of digests shortened to its length and first one."""
    if isinstance(request, dict) and isinstance(request.get("digest"), list):
        d = request["digest"]
        return {**request, "digest": f"[{len(d)} digests, first {str(d[0])[:16] if d else ''}...]"}
    return request



# -- jobs (``shaper fhe`` and benchmarks/threshold_ckks.py) ------------------------------------

def engine_for(session: Any) -> Any:
    """The n-party engine key generation and decryption run on: OT-extension preprocessing."""
    from .nparty import AdditiveNPC
    from .triples import OtTriples

    return AdditiveNPC(session, triple_source=OtTriples(), frac_bits=0)


def keygen_job(session: Any, chain: tuple = CNN_CHAIN, *, rotations: Iterable[int] = (), conjugation: bool = False,
               method: str = "exact", check: bool = True, insecure: bool = False,
               out: str | os.PathLike | None = None, progress: Progress | None = None) -> dict:
    """One party's key generation as a job: builds the engine and the parameters from ``chain``
    (N, q bits, p bits, scale bits), runs :func:`keygen`, writes the keys to ``out`` (a new
    directory) when given, and returns the phases (time, bytes this party sent), key sizes and
    totals as plain data."""
    n, q_bits, p_bits, scale_bits = chain
    params = ckks.Parameters.from_literal(n, list(q_bits), p_bits, scale_bits, insecure=insecure)
    start, sent0 = time.perf_counter(), session.stats.bytes_sent
    keys = keygen(engine_for(session), params, rotations=rotations, conjugation=conjugation, method=method,
                  check=check, progress=progress)
    seconds = time.perf_counter() - start
    if out is not None:
        keys.save(out)
    return {"party": session.name, "parties": session.n, "seconds": seconds,
            "bytes_sent": session.stats.bytes_sent - sent0, "phases": [p.__dict__ for p in keys.phases],
            "sizes": keys.sizes(), "rotation_keys": len(keys.galois), "method": method,
            "fingerprint": params.fingerprint.hex(), "out": None if out is None else str(out)}


def decrypt_job(session: Any, keys_dir: str | os.PathLike, ciphertext: str | os.PathLike, *, to: str | None = None,
                smudge_bits: int = SMUDGE_BITS, digest: str | None = None) -> dict:
    """One party's part of a joint decryption as a job: loads its key directory and the
    ciphertext file, consents only when ``digest`` (a hex prefix, if given) matches the
    ciphertext's, and decrypts to party ``to`` (every party when None)."""
    keys = JointKeys.load(keys_dir)
    if keys.share.parties != session.n:
        raise ConfigError(f"{keys_dir} holds a share of a {keys.share.parties}-party key, this job has {session.n} parties")
    if keys.share.index != session.index:
        raise ConfigError(f"{keys_dir} holds party {keys.share.index}'s share, but this is party {session.index} "
                          f"({session.name!r}): parties must keep the order they had at key generation")
    ct = ckks.load(ciphertext, keys.params)
    if not isinstance(ct, ckks.Ciphertext):
        raise ConfigError(f"{ciphertext} does not hold a CKKS ciphertext")
    want = None if digest is None else digest.strip().lower()
    if to is not None and to not in session.parties:
        raise ConfigError(f"decryption recipient {to!r} is not a party of this job ({', '.join(session.parties)})")
    target = None if to is None else session.parties.index(to)
    start = time.perf_counter()
    values = decrypt(engine_for(session), keys.share, ct, to=target, smudge_bits=smudge_bits,
                     approve=None if want is None else lambda req: req["digest"].startswith(want))
    return {"party": session.name, "digest": ciphertext_digest(ct), "values": values,
            "seconds": time.perf_counter() - start, "scale": ct.scale,
            "precision_bits": decryption_precision(keys.params, ct.scale, smudge_bits)}
