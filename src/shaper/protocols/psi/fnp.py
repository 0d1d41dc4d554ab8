"""Freedman–Nissim–Pinkas PSI with Paillier (Eurocrypt 2004; the seed paper's case study, San
et al. 2016), with simple hashing into bins.

**Protocol.** The client C (the party that learns) makes a Paillier key pair and hashes each of
its ids to an l-bit value h(x), l = max(64, 40 + log2(n_C n_S)) rounded up to bytes, and to a bin
of B = ceil(n_C / 2). Per bin it builds the monic polynomial P_b of degree L whose roots are the
bin's h(x), padded with dummy roots of l + 1 bits (never equal to a hash), and sends the
encrypted coefficients Enc(alpha_0..alpha_{L-1}), bin by bin. The server S evaluates, for each
of its ids y, the polynomial of y's bin at h(y) by Horner's rule on the batched kernels
(``acc = acc^h(y) * Enc(alpha_u)``; the first step is a plaintext addition), then forms

    Enc(r P(h(y)) + h(y))      (intersection)
    Enc(r P(h(y)) + h(y) + payload 2^l)      (labelled: S's payload bytes for y)
    Enc(r P(h(y)))      (cardinality only)

with r uniform in Z_n (a fresh full-length r per y: a short r would let C test guesses), adds a
fresh encryption of zero (C knows the randomness of its coefficients), shuffles all n_S results
with a CSPRNG permutation and returns them. C decrypts: a value whose low l bits are one of its
hashes (and whose high part is the payload) marks a shared id; anything else is uniform in Z_n.

**Bins.** L is the smallest load that a Poisson(n_C / B) bin exceeds with probability at most
2^-40 / B (so no bin of a random set overflows except with probability 2^-40: L = 22, 23, 24
at 2^12, 2^16, 2^20). L is a function of the declared n_C alone (:func:`bin_capacity`): the
server computes it itself and refuses an announcement of any other degree (0, 257, or one that
does not match n_C) by name, so the client cannot choose how many roots it gets. In the 2^-40
event that a bin of the client's hashes still holds more than L, the client stops with an error
instead of raising L.

**Security** (semi-honest, Paillier's DCR assumption). C learns the intersection (or its size,
or the matched payloads) and n_S; S learns n_C. Two different ids share an l-bit hash with
probability below n_C n_S 2^-l <= 2^-40. The server refuses a key of another size than agreed
and coefficients whose Jacobi symbol no encryption under the client's key produces.

*What a deviating client can still learn.* The padding roots are encrypted, so the server cannot
tell a dummy from a guess: a client that fills every bin's padding with hashes of ids it wants to
test learns about up to B L = ceil(n_C / 2) L ids instead of n_C, about L / 2 per declared id
(14 at n_C = 1, 9.5 at 10, 11 at 2^12, 12 at 2^20), and in labelled mode their payloads. It
cannot test more than that: the degree, and so the number of roots, is fixed by n_C. Bounding
it to exactly n_C would need a proof that the dummy roots are dummies, or one polynomial of
degree n_C for all ids (cost n_C n_S instead of L n_S). Size the declared set accordingly: the
server decides whether n_C is acceptable before it answers.

Costs per item: C encrypts about L/2 + 1 coefficients and decrypts one result; S runs L - 1
exponentiations with l-bit exponents, one with a full-length exponent and one re-randomisation.
"""

from __future__ import annotations

import hashlib
import math
import time
from typing import Any, Callable

import numpy as np

from ...arrays import ints_from_bytes, ints_to_bytes, object_array
from ...crypto.encoding import SIGMA
from ...errors import ConfigError, FrameError
from ...net.phases import Meter
from .checkpoint import PsiCheckpoint, open_run, start_run
from .common import PsiResult, permutation, recv_rows, recv_size
from .items import PackedItems

VERSION = "shaper-psi/fnp/1"  # the scheme travels in the hello
DOMAIN = b"shaper/psi/fnp/v1\0"
BINS_PER_MESSAGE = 256
RESULTS_PER_MESSAGE = 4096
MAX_LOAD = 256  # a bin degree beyond this is refused (a malformed announcement, not a random set)


def hash_bits(n_client: int, n_server: int) -> int:
    """l: at least 40 + log2(n_C n_S) bits, at least 64, whole bytes."""
    need = SIGMA + math.ceil(math.log2(max(1, n_client) * max(1, n_server)))
    return 8 * math.ceil(max(64, need) / 8)


def bin_count(n_client: int) -> int:
    return max(1, math.ceil(n_client / 2))


def bin_capacity(n_client: int, bins: int) -> int:
    """The smallest L with bins * P(Poisson(n_C / bins) > L) <= 2^-40."""
    from scipy.stats import poisson

    mean = n_client / bins
    load = max(1, math.ceil(mean))
    while bins * poisson.sf(load, mean) > 2.0 ** -SIGMA:
        load += 1
    return load


def digests(items: PackedItems, bits: int, bins: int) -> tuple[list[int], np.ndarray]:
    """(h(x) of ``bits`` bits, bin of x) for every item: bytes 0..15 and 16..23 of
    SHA-256(DOMAIN || x), little-endian."""
    d = items.digests(DOMAIN, 24)
    mask = (1 << bits) - 1
    raw = np.ascontiguousarray(d[:, :16]).tobytes()
    hashes = [int.from_bytes(raw[k:k + 16], "little") & mask for k in range(0, len(raw), 16)]
    where = (np.ascontiguousarray(d[:, 16:]).view("<u8")[:, 0] % np.uint64(bins)).astype(np.int64)
    return hashes, where


def coefficients(roots: np.ndarray, modulus: int) -> np.ndarray:
    """Rows of the monic polynomials prod_j (t - roots[b, j]) mod ``modulus``: (bins, L) object
    array of alpha_0..alpha_{L-1} (alpha_L = 1 is implicit). Vectorised over the bins."""
    bins, degree = roots.shape
    coef = np.zeros((bins, degree + 1), dtype=object)
    coef[:, 0] = 1  # coef[:, k] is the coefficient of t^k of the product so far
    for j in range(degree):
        r = roots[:, j]
        shifted = np.zeros_like(coef)
        shifted[:, 1:] = coef[:, :-1]  # t * poly
        coef = (shifted - coef * r[:, None]) % modulus
    return coef[:, :degree]


def plaintext_bits(scheme: str, key_bits: int) -> int:
    """Bits a hash with its payload may use: below n for Paillier; below OU's plaintext bound
    2^(|p| - 2) (|p| = ceil(key_bits / 3)) for OU."""
    return key_bits - 2 if scheme == "paillier" else -(-key_bits // 3) - 3


def intersect(session: Any, peer: Any, items: PackedItems, *, client: Any, both: bool = False, mode: str = "intersection",
              payloads: list[bytes] | None = None, payload_bytes: int = 0, key_bits: int = 2048,
              scheme: str = "paillier", progress: Callable[[dict], None] | None = None, settings: str = "",
              checkpoint_dir: str | None = None, resume: bool = False) -> PsiResult:
    """FNP between this party and ``peer``; ``client`` (name or index) learns. ``mode``:
    "intersection", "cardinality" or "labelled" (the server passes ``payloads``, one bytes
    value per item of at most ``payload_bytes``; the client gets them in ``stats["payloads"]``).
    ``both``: the client then tells the server its rows of the intersection (their positions in
    the server's shuffled results) or its size, so both parties hold the result in one order.
    ``checkpoint_dir`` / ``resume``: the client keeps its key pair and the server its evaluations,
    block by block, so a killed run continues where the server stopped (:mod:`.checkpoint`)."""
    if scheme not in ("paillier", "ou"):
        raise ConfigError(f"scheme must be 'paillier' or 'ou', got {scheme!r}")
    if mode not in ("intersection", "cardinality", "labelled"):
        raise ConfigError(f"mode must be 'intersection', 'cardinality' or 'labelled', got {mode!r}")
    meter = Meter(session)  # the run's time and traffic
    me, other = session.index, session.parties.index(session.peer_name(peer))
    c = client if isinstance(client, int) else session.parties.index(client)
    if both and mode == "labelled":
        raise ConfigError("labelled FNP gives the payloads to the client only: pass both=False")
    hello = {"version": VERSION, "to": "both" if both else session.parties[c], "cardinality_only": mode == "cardinality",
             "n": len(items), "chunk": BINS_PER_MESSAGE, "settings": f"{settings}, client={session.parties[c]}, mode={mode}, "
             f"payload_bytes={payload_bytes}, key_bits={key_bits}, scheme={scheme}"}
    extra = "" if payloads is None else hashlib.sha256(b"".join(len(p).to_bytes(4, "little") + p
                                                                for p in payloads)).hexdigest()
    theirs, ckpt, state = open_run(session, other, hello, items, checkpoint_dir, resume, "fnp", extra)
    saved = _Saved(ckpt, state)
    n_peer = int(theirs["n"])
    report = progress or (lambda event: None)
    bits = hash_bits(len(items), n_peer)
    room = plaintext_bits(scheme, key_bits)
    if bits + 8 * payload_bytes > room:
        raise ConfigError(f"a {payload_bytes}-byte payload and a {bits}-bit hash do not fit a {key_bits}-bit "
                          f"{scheme} plaintext: at most {(room - bits) // 8} payload bytes")
    if me == c:
        return _client(session, other, items, n_peer, mode, payload_bytes, key_bits, scheme, both, saved, report,
                       meter)
    if mode == "labelled":
        if payloads is None or len(payloads) != len(items):
            raise ConfigError("labelled PSI: the server passes one payload per item")
        if any(len(p) > payload_bytes for p in payloads):
            raise ConfigError(f"a payload is longer than payload_bytes={payload_bytes}")
    return _server(session, other, items, n_peer, mode, payloads, payload_bytes, key_bits, scheme, both, saved,
                   report, meter)


def _client(session: Any, other: int, items: PackedItems, n_server: int, mode: str, payload_bytes: int,
            key_bits: int, scheme: str, both: bool, saved: "_Saved", report: Callable, meter: Meter) -> PsiResult:
    from ...crypto import ou, paillier
    from ...crypto.serialization import key_from_bytes, key_to_bytes

    n = len(items)
    bits, bins = hash_bits(n, n_server), bin_count(n)
    if saved.state is not None:
        sk = key_from_bytes(saved.ckpt.secret(saved.state, "secret_key"))
        pk = sk.public_key
    else:
        pk, sk = (paillier if scheme == "paillier" else ou).keygen(key_bits)
        start_run(session, other, saved.ckpt, {"secret_key": key_to_bytes(sk)}, ())
    modulus = int(pk.n) if scheme == "paillier" else int(sk.p)  # plaintexts live mod n, or mod OU's secret p
    hashes, where = digests(items, bits, bins)
    loads = np.bincount(where, minlength=bins)
    degree = bin_capacity(n, bins)  # fixed by n: the server computes and checks the same value
    if n and int(loads.max()) > degree:
        raise ConfigError(f"{int(loads.max())} of this party's {n} ids hash to one bin, more than the {degree} a "
                          "bin holds (probability 2^-40 for distinct ids); FNP cannot run on this set")
    session.send(other, {"public_key": pk.to_bytes().hex(), "degree": degree}, "fnp-key")
    roots = np.empty((bins, degree), dtype=object)
    fill = np.zeros(bins, dtype=np.int64)
    for h, b in zip(hashes, where.tolist()):
        roots[b, fill[b]] = h
        fill[b] += 1
    dummies = iter(session.prg.randbits(bits, bins * degree - n))  # l + 1 bits with the top bit: never a hash
    for b in range(bins):
        for j in range(int(fill[b]), degree):
            roots[b, j] = (1 << bits) | next(dummies)
    coef = coefficients(roots, modulus)

    spent = {"encrypt_seconds": 0.0, "decrypt_seconds": 0.0}

    def encrypt(start: int) -> bytes:
        t0 = time.perf_counter()
        block = coef[start:start + BINS_PER_MESSAGE].ravel().tolist()
        out = ints_to_bytes([int(v) for v in _encrypt_residues(pk, sk, block, modulus, scheme)])
        spent["encrypt_seconds"] += time.perf_counter() - t0
        report({"event": "psi", "stage": "encrypt", "done": min(start + BINS_PER_MESSAGE, bins), "total": bins})
        return out

    blocks = -(-bins // BINS_PER_MESSAGE)
    msg = session.recv_meta(other, "psi-progress")
    done = msg.get("done") if isinstance(msg, dict) else None
    if not isinstance(done, int) or isinstance(done, bool) or not 0 <= done <= blocks or done and saved.state is None:
        raise FrameError(f"the server announced an impossible resume point {msg!r}")
    if saved.state is not None:
        report({"event": "resume", "blocks": done})
    session.send_pipelined(other, range(done * BINS_PER_MESSAGE, bins, BINS_PER_MESSAGE), encrypt, tag="fnp-coef")
    values: list[int] = []
    while len(values) < n_server:
        cts = ints_from_bytes(session.recv_bytes(other, "fnp-result"))
        if not cts or len(values) + len(cts) > n_server:
            raise FrameError("the server returned more results than it has ids")
        t0 = time.perf_counter()
        values += sk.raw_decrypt(cts)
        spent["decrypt_seconds"] += time.perf_counter() - t0
        report({"event": "psi", "stage": "decrypt", "done": len(values), "total": n_server})
    if mode == "cardinality":
        size = sum(1 for v in values if v == 0)
        if both:
            session.send(other, {"size": size}, "psi-size")
        saved.clear()
        return PsiResult(None, size, n_server, _client_stats(meter, spent, bins, degree, bits))
    mask = (1 << bits) - 1
    row_of = {h: i for i, h in enumerate(hashes)}
    matched = sorted((row_of[v & mask], v >> bits, j) for j, v in enumerate(values)
                     if (v & mask) in row_of and v >> bits < 1 << (8 * payload_bytes))
    rows = np.array([r for r, _, _ in matched], dtype=np.int64)
    if both:  # the matches' positions in the server's shuffled results, in the client's row order
        session.send(other, np.array([j for _, _, j in matched], dtype=np.int64), "psi-rows")
    saved.clear()
    stats = _client_stats(meter, spent, bins, degree, bits)
    if mode == "labelled":
        stats["payloads"] = [p.to_bytes(payload_bytes, "little") for _, p, _ in matched]
    return PsiResult(rows, len(rows), n_server, stats)


def _client_stats(meter: Meter, spent: dict, bins: int, degree: int, bits: int) -> dict:
    return {**meter.figures(), **{k: round(v, 3) for k, v in spent.items()},
            "bins": bins, "degree": degree, "hash_bits": bits}


def _encrypt_residues(pk: Any, sk: Any, residues: list, modulus: int, scheme: str) -> list:
    """Encryptions of arbitrary residues mod the plaintext modulus. Paillier takes any residue.
    OU's encryption takes |m| <= 2^(|p| - 2) - 1 only, but a coefficient is any residue mod p:
    centred (|m| <= p/2) and split m = a + b with |a|, |b| <= p/4 + 1, it is Enc(a) times g^b."""
    if scheme == "paillier":
        return sk.raw_encrypt(residues)
    centred = [int(m) - modulus if int(m) > modulus // 2 else int(m) for m in residues]
    halves = [m >> 1 for m in centred]
    return pk.raw_add_plain(pk.raw_encrypt(halves), [m - h for m, h in zip(centred, halves)])


def _server(session: Any, other: int, items: PackedItems, n_client: int, mode: str, payloads: list[bytes] | None,
            payload_bytes: int, key_bits: int, scheme: str, both: bool, saved: "_Saved", report: Callable,
            meter: Meter) -> PsiResult:
    from ...crypto.ou import OUPublicKey
    from ...crypto.paillier import PaillierPublicKey
    from ...kernels import get_kernel

    if saved.state is None:
        start_run(session, other, saved.ckpt, {}, ("results.bin",))
    msg = session.recv_meta(other, "fnp-key")
    key_class = PaillierPublicKey if scheme == "paillier" else OUPublicKey
    try:
        pk = key_class.from_bytes(bytes.fromhex(msg["public_key"]))
        degree = int(msg["degree"])
    except (KeyError, TypeError, ValueError) as exc:
        raise FrameError(f"the client sent a malformed key message: {exc}") from None
    if pk.bits != key_bits:
        raise FrameError(f"the client announced a {pk.bits}-bit key; the agreed size is {key_bits} bits")
    bits, bins = hash_bits(n_client, len(items)), bin_count(n_client)
    if not 1 <= degree <= MAX_LOAD:
        raise FrameError(f"the client announced bin degree {degree}, outside 1..{MAX_LOAD}")
    expected = bin_capacity(n_client, bins)
    if degree != expected:
        raise FrameError(f"the client announced bin degree {degree}; its declared {n_client} ids give degree "
                         f"{expected} (a larger degree would let it test more ids than it declared)")
    modulus = int(pk.ciphertext_modulus)  # n^2 (Paillier) or n (OU)
    r_bound = int(pk.n) if scheme == "paillier" else 1 << (pk.prime_bits + SIGMA)  # OU: uniform mod p to 2^-40
    hashes, where = digests(items, bits, bins)
    plain = list(hashes)
    if mode == "labelled":
        plain = [h + (int.from_bytes(p, "little") << bits) for h, p in zip(hashes, payloads)]
    by_bin = np.argsort(where, kind="stable")
    bounds = np.searchsorted(where[by_bin], np.arange(0, bins + BINS_PER_MESSAGE, BINS_PER_MESSAGE))
    kernel = get_kernel()
    results = np.empty(len(items), dtype=object)
    width = (modulus.bit_length() + 7) // 8  # a saved result's bytes
    done = 0
    if saved.state is not None:  # the blocks evaluated before the kill, under the client's saved key
        sizes = np.diff(bounds).astype(np.int64) * width
        done, data = saved.ckpt.read_blocks("results.bin", sizes.tolist())
        at = by_bin[:bounds[done]]
        results[at] = object_array([int.from_bytes(data[i:i + width], "little") for i in range(0, len(data), width)])
        pk.validate_ciphertexts(results[at].tolist())
        report({"event": "resume", "blocks": done})
    session.send(other, {"done": done}, "psi-progress")
    evaluate = 0.0
    for k, start in enumerate(range(done * BINS_PER_MESSAGE, bins, BINS_PER_MESSAGE), start=done):
        count = min(BINS_PER_MESSAGE, bins - start)
        flat = ints_from_bytes(session.recv_bytes(other, "fnp-coef"))
        t0 = time.perf_counter()
        if len(flat) != count * degree:
            raise FrameError(f"the client sent {len(flat)} coefficients for {count} bins of degree {degree}")
        pk.validate_received(flat)  # range, coprimality and the Jacobi symbol of the client's encryptions
        coef = object_array(flat).reshape(count, degree)
        sel = by_bin[bounds[k]:bounds[k + 1]]
        if not len(sel):
            continue
        ys = [hashes[i] for i in sel]
        rows = where[sel] - start
        acc = pk.raw_add_plain(coef[rows, degree - 1].tolist(), ys)  # Enc(h + alpha_{L-1})
        for u in range(degree - 2, -1, -1):
            acc = kernel.mulmod(kernel.powmod(acc, ys, modulus), coef[rows, u].tolist(), modulus)
        acc = kernel.powmod(acc, session.prg.randbelow(r_bound, len(sel)), modulus)  # r P(h(y)), r uniform
        if mode != "cardinality":
            acc = pk.raw_add_plain(acc, [plain[i] for i in sel])
        results[sel] = object_array(pk.raw_rerandomize(acc))
        if saved.ckpt is not None:
            saved.ckpt.append("results.bin", b"".join(int(v).to_bytes(width, "little") for v in results[sel]))
        evaluate += time.perf_counter() - t0
        report({"event": "psi", "stage": "evaluate", "done": int(bounds[k + 1]), "total": len(items)})
    order = permutation(len(items))
    shuffled = results[order]
    session.send_pipelined(other, range(0, len(items), RESULTS_PER_MESSAGE),
                           lambda s: ints_to_bytes([int(v) for v in shuffled[s:s + RESULTS_PER_MESSAGE]]),
                           tag="fnp-result")
    stats = {**meter.figures(), "evaluate_seconds": round(evaluate, 3)}
    result = PsiResult(None, None, n_client, stats)
    limit = min(n_client, len(items))
    if both and mode == "cardinality":
        result = PsiResult(None, recv_size(session, other, limit), n_client, stats)
    elif both:
        rows = recv_rows(session, other, order, limit)
        result = PsiResult(rows, len(rows), n_client, stats)
    saved.clear()
    return result


class _Saved:
    """This party's checkpoint of an FNP run, if any, and its saved state when resuming."""

    def __init__(self, ckpt: PsiCheckpoint | None, state: dict | None) -> None:
        self.ckpt, self.state = ckpt, state

    def clear(self) -> None:
        if self.ckpt is not None:
            self.ckpt.clear()
