"""Paillier encryption in the Damgård–Jurik–Nielsen (DJN) form, batched.

Keys (``docs/ahe.md``): p ≡ q ≡ 3 (mod 4), gcd(p-1, q-1) = 2, n = pq, g = n + 1,
h_s = -x^(2n) mod n^2 with x = hash-to-Z*_n of n (:func:`derive_hs`). Encryption is

    Enc(m; r) = (1 + m n) * h_s^r  mod n^2,   r uniform in [0, 2^exponent_bits),

with ``exponent_bits = ceil(|n|/2)`` by default (Damgård–Jurik–Nielsen's own choice; ABY and HEU
do the same). A shorter exponent (e.g. twice the security level) is available only through the
explicit ``exponent_bits=`` argument of :func:`keygen`; it rests on the stronger short-exponent
assumption and is recorded in the key.

* Public-key encryption uses a fixed-base window table of h_s mod n^2, built once per key and
  process and cached (see :mod:`shaper.kernels.gmp`).
* Key-owner encryption (:meth:`PaillierPrivateKey.encrypt`) uses tables mod p^2 and q^2 and one
  CRT join: about a third of the public-key cost.
* Decryption uses CRT: c^(p-1) mod p^2 and c^(q-1) mod q^2.
* Ciphertext + plaintext uses (1 + m n) c = c + n (m c mod n) (mod n^2): no exponentiation.

A DJN ciphertext is an ordinary Paillier ciphertext for g = n + 1, so python-paillier decrypts
ours and we decrypt its (:func:`to_phe`, :func:`from_phe`). Keys imported from elsewhere whose
primes do not have the DJN form get a full-length exponent (|n| + 40 bits) so that h_s^r is
statistically close to uniform in the group h_s generates.

Security model: IND-CPA under the decisional composite residuosity assumption (plus the
short-exponent assumption for a shortened r). Homomorphic results must be re-randomised before
they go to the key owner. The gmpy2 kernel is not constant time (see :mod:`shaper.kernels.gmp`).

**A peer's key is its modulus.** h_s is not chosen by the key owner: every party derives it
from n alone (:func:`derive_hs`), and parsing a key (binary or JSON) ignores any stored h_s and
derives it again, so key files written before this rule load unchanged (their old h_s is
replaced; ciphertexts made under it still decrypt, since decryption never uses h_s). Why derive
rather than check: a peer cannot verify the order of a chosen h_s without the factorisation, and
a key owner who picks h_s = n^2 - 1 (order 2), or any element of small order, turns the peer's
re-randomisation c * h_s^r into a multiplication by one of a few known values, so whatever the
peer multiplied into c (a secret matrix entry, a PSI multiplier) could be read out of the
randomness. A derived h_s is a hash of n: the key owner, who knows p and q, cannot steer it into
a small subgroup short of generating keys over and over until the hash lands in one (each try a
full key generation, and landing in a subgroup of index d takes about d tries). It is the same
distribution an honest key generation draws from, so the peer gets the hiding it would get from
an honest key owner: h_s^r, r of ceil(|n|/2) bits, is indistinguishable from a random element
of the group h_s generates under the short-exponent discrete-log assumption modulo p and q,
which knowing p and q does not break for randomly drawn primes (it only splits the problem in
two). The parity channel is closed
separately: every ciphertext made with such a key has Jacobi symbol (c mod n | n) = +1, a
public, multiplicative property, so a ciphertext with symbol -1 is refused where a party
receives it (:meth:`~shaper.crypto.ahe.EncryptedArray.from_bytes`); otherwise a key owner
could learn the parity of a peer's multiplier from the result. What remains: a key owner who
generates n dishonestly (p - 1 smooth, so that discrete logarithms are easy for it, or
gcd(n, phi(n)) != 1) is not detected; shaper has no zero-knowledge proof that n is well formed.
"""

from __future__ import annotations

import functools
import hashlib
import struct
import weakref
from typing import Any, Sequence

import gmpy2
import numpy as np
from gmpy2 import mpz

from ..arrays import object_array
from ..errors import KeyValidationError, SerializationError
from ..kernels import FixedBaseSpec, get_kernel
from . import counters, encoding, primes, wire
from .ahe import AHEPrivateKey, AHEPublicKey, EncryptedArray
from .encoding import SIGMA
from .prg import default_prg

__all__ = [
    "PaillierPublicKey",
    "PaillierPrivateKey",
    "keygen",
    "to_phe",
    "from_phe",
    "derive_hs",
    "MIN_KEY_BITS",
]

MIN_KEY_BITS = 512
_HS_DOMAIN = b"shaper/paillier/h_s/v1\0"

# Public keys seen in this process, by modulus (weak: keys are not kept alive by this map).
_KNOWN_KEYS: "weakref.WeakValueDictionary[int, PaillierPublicKey]" = weakref.WeakValueDictionary()


def _full_exponent_bits(bits: int) -> int:
    return bits + SIGMA


class PaillierPublicKey(AHEPublicKey):
    """Paillier public key (n, h_s). Create with :func:`keygen` or load with
    :func:`shaper.crypto.serialization.load_key`."""

    scheme = "paillier"
    scheme_id = wire.SCHEME_PAILLIER

    def __init__(self, n: int, hs: int | None = None, *, exponent_bits: int | None = None,
                 djn: bool = True) -> None:
        self.n = mpz(n)
        self.n_squared = self.n * self.n
        self._validate_modulus()
        # ``hs`` given explicitly only for fixed known-answer keys; everything else derives it.
        self.hs = derive_hs(self.n) if hs is None else mpz(hs)
        self.djn = bool(djn)
        bits = int(self.n).bit_length()
        if exponent_bits is None:
            exponent_bits = (bits + 1) // 2 if djn else _full_exponent_bits(bits)
        self.exponent_bits = int(exponent_bits)
        self.ciphertext_modulus = self.n_squared
        self.max_int = int(self.n // 3 - 1)
        self.packing_capacity_bits = bits - 1
        self._validate()
        self._fixed_symbol = gmpy2.jacobi(self.hs % self.n, self.n) == 1
        self._randomizer_spec = FixedBaseSpec(int(self.hs), int(self.n_squared), self.exponent_bits)
        self._randomizer_spec_fast = FixedBaseSpec(int(self.hs), int(self.n_squared), self.exponent_bits,
                                                   constant_time=False)
        # Identity of the plaintext space: ciphertexts under the same n combine and decrypt
        # alike whatever h_s produced their randomness, so h_s is not part of it.
        self._fingerprint = hashlib.sha256(
            b"shaper/paillier/n/v1" + int(self.n).to_bytes((bits + 7) // 8, "big")
        ).digest()
        _KNOWN_KEYS.setdefault(int(self.n), self)

    def _validate_modulus(self) -> None:
        n = self.n
        bits = int(n).bit_length()
        if bits < MIN_KEY_BITS:
            raise KeyValidationError(f"Paillier modulus has {bits} bits; at least {MIN_KEY_BITS} are required")
        if n % 2 == 0 or gmpy2.is_square(n):
            raise KeyValidationError("Paillier modulus must be an odd non-square")
        if gmpy2.gcd(n, mpz(2 * 3 * 5 * 7 * 11 * 13 * 17 * 19 * 23 * 29 * 31 * 37)) != 1:
            raise KeyValidationError("Paillier modulus has a small prime factor")

    def _validate(self) -> None:
        n = self.n
        if not 1 < self.hs < self.n_squared or gmpy2.gcd(self.hs, n) != 1:
            raise KeyValidationError("h_s must be a unit in (1, n^2)")
        if gmpy2.powmod(self.hs, 2, self.n_squared) == 1:
            raise KeyValidationError("h_s has order 2 (it is n^2 - 1): re-randomising with it would hide nothing")
        if self.exponent_bits < 128:
            raise KeyValidationError(
                f"random exponent of {self.exponent_bits} bits is too short (minimum 128)"
            )

    @property
    def fingerprint(self) -> bytes:
        return self._fingerprint

    def _symbol_is_fixed(self) -> bool:
        # (1 + m n) h_s^r = h_s^r mod n: every ciphertext has h_s's symbol, +1 for DJN (Blum) moduli
        return self._fixed_symbol

    # -- serialisation: n (width of n), h_s (width of n^2), u32 exponent_bits, u8 djn ----------
    def body(self) -> bytes:
        width = (self.bits + 7) // 8
        return (wire.int_field(self.n, width) + wire.int_field(self.hs, 2 * width)
                + struct.pack("<IB", self.exponent_bits, int(self.djn)))

    @classmethod
    def read_body(cls, r: wire.Reader) -> "PaillierPublicKey":
        """The stored h_s is read and ignored: h_s is derived from n (see the module docstring)."""
        n = r.integer("n")
        r.integer("h_s")
        exponent_bits, djn = r.unpack("IB", "exponent bits and DJN flag")
        return cls(n, exponent_bits=exponent_bits, djn=bool(djn))

    def to_jwk(self) -> dict:
        """python-paillier's JWK (``kty`` "DAJ", ``alg`` "PAI-GN1") plus ``hs``,
        ``exponent_bits`` and ``djn``, so ``pheutil`` reads it."""
        return {"kty": "DAJ", "alg": "PAI-GN1", "key_ops": ["encrypt"], "n": wire.b64(self.n),
                "hs": wire.b64(self.hs), "exponent_bits": self.exponent_bits, "djn": self.djn,
                "kid": f"shaper paillier {self.bits} {self.fingerprint.hex()[:16]}"}

    @classmethod
    def from_jwk(cls, doc: dict) -> "PaillierPublicKey":
        """Ours (its ``hs`` is ignored: h_s is derived from n), or a plain python-paillier key
        (no ``hs``: the key this process already uses for that modulus, else one with a
        full-length exponent)."""
        n = wire.unb64(doc.get("n"), "n")
        if "hs" not in doc:
            return _foreign_public_key(n)
        djn = doc.get("djn", True)
        exponent_bits = doc.get("exponent_bits")
        if not isinstance(djn, bool) or not (exponent_bits is None or isinstance(exponent_bits, int)):
            raise SerializationError("JSON fields 'djn' (bool) / 'exponent_bits' (int) have the wrong type")
        return cls(n, exponent_bits=exponent_bits, djn=djn)

    def __repr__(self) -> str:
        return (f"PaillierPublicKey(bits={self.bits}, exponent_bits={self.exponent_bits}, "
                f"djn={self.djn}, fingerprint={self._fingerprint.hex()[:16]})")

    # -- raw batched operations ------------------------------------------------------------
    def raw_encrypt(self, signed_values: Sequence[int], exponent_bytes: np.ndarray | None = None, *,
                    mont_out: bool = False, constant_time: bool = True) -> Any:
        count = len(signed_values)
        counters.add("encryptions", count)
        if exponent_bytes is None:
            exponent_bytes = default_prg().exponent_bytes(count, self.exponent_bits)
        n = self.n
        # 1 + m n < n^2 for m in [0, n): the g^m factor needs no exponentiation.
        residues = object_array(list(signed_values)) % n
        multipliers = (residues * n + 1).tolist()
        spec = self._randomizer_spec if constant_time else self._randomizer_spec_fast
        if mont_out:
            return get_kernel().mont_fixed_base([spec], [exponent_bytes], multipliers, self.n_squared)
        return get_kernel().fixed_base_powmod([spec], [exponent_bytes], multipliers, self.n_squared)

    def raw_add_plain(self, ciphertexts: Sequence, signed_values: Sequence[int]) -> list:
        n, n2 = self.n, self.n_squared
        c = object_array(list(ciphertexts))
        m = object_array(list(signed_values)) % n
        # (1 + m n) c = c + n (m c mod n)  (mod n^2): one half-size product instead of a full one.
        return ((c + n * ((m * c) % n)) % n2).tolist()



class PaillierPrivateKey(AHEPrivateKey):
    """Paillier private key (the primes p, q). Holds CRT constants and key-owner tables."""

    public_class = PaillierPublicKey

    def __init__(self, public_key: PaillierPublicKey, p: int, q: int) -> None:
        self.public_key = public_key
        p, q = mpz(p), mpz(q)
        if p > q:
            p, q = q, p
        self.p, self.q = p, q
        self._validate()
        self.p_squared = p * p
        self.q_squared = q * q
        n = public_key.n
        # h_p = L_p(g^(p-1) mod p^2)^-1 mod p with g = n + 1.
        self._hp = gmpy2.invert((gmpy2.powmod(n + 1, p - 1, self.p_squared) - 1) // p, p)
        self._hq = gmpy2.invert((gmpy2.powmod(n + 1, q - 1, self.q_squared) - 1) // q, q)
        self._q_inv_p = gmpy2.invert(q, p)
        self._q2_inv_p2 = gmpy2.invert(self.q_squared, self.p_squared)
        hs = public_key.hs
        bits = public_key.exponent_bits
        self._spec_p = FixedBaseSpec(int(hs % self.p_squared), int(self.p_squared), bits)
        self._spec_q = FixedBaseSpec(int(hs % self.q_squared), int(self.q_squared), bits)

    def _validate(self) -> None:
        pk = self.public_key
        p, q = self.p, self.q
        if p * q != pk.n:
            raise KeyValidationError("private key primes do not multiply to the public modulus")
        if p == q:
            raise KeyValidationError("private key primes must be distinct")
        if not (primes.is_prime(p) and primes.is_prime(q)):
            raise KeyValidationError("private key factors are not prime")
        lam = (p - 1) * (q - 1)
        # h_s must be an n-th residue: its order divides lambda (so it carries no m-component).
        if gmpy2.powmod(pk.hs, lam, pk.n_squared) != 1:
            raise KeyValidationError("h_s is not an n-th residue for this key (h_s^lambda != 1 mod n^2)")
        if pk.djn and not is_djn_form(p, q):
            raise KeyValidationError("key is marked DJN but p, q are not ≡ 3 mod 4 with gcd(p-1, q-1) = 2")

    def _plaintext_modulus(self) -> int:
        return int(self.public_key.n)

    # -- serialisation: p, q (half the width of n + 1 bytes each) ------------------------------
    def body(self) -> bytes:
        half = (self.public_key.bits + 15) // 16 + 1
        return wire.int_field(self.p, half) + wire.int_field(self.q, half)

    @classmethod
    def read_body(cls, r: wire.Reader, public_key: AHEPublicKey) -> "PaillierPrivateKey":
        if not isinstance(public_key, PaillierPublicKey):
            raise SerializationError("a Paillier private key needs a Paillier public key")
        return cls(public_key, r.integer("p"), r.integer("q"))

    def to_jwk(self) -> dict:
        pub = self.public_key.to_jwk()
        return {"kty": "DAJ", "key_ops": ["decrypt"], "p": wire.b64(self.p), "q": wire.b64(self.q),
                "pub": pub, "kid": pub["kid"]}

    @classmethod
    def from_jwk(cls, doc: dict) -> "PaillierPrivateKey":
        """Ours, or python-paillier's private JWK (its ``pub`` has no ``hs``: derive one)."""
        p, q = wire.unb64(doc.get("p"), "p"), wire.unb64(doc.get("q"), "q")
        pub = doc["pub"]
        if "hs" in pub:
            public_key = PaillierPublicKey.from_jwk(pub)
        else:
            n = wire.unb64(pub.get("n"), "n")
            public_key = _KNOWN_KEYS.get(int(n)) or PaillierPublicKey(n, djn=is_djn_form(p, q))
        return cls(public_key, p, q)

    def decrypt_validated(self, cts: list) -> list:
        p, q = self.p, self.q
        halves = get_kernel().gather([
            ("powmod_same_exponent", (cts, p - 1, self.p_squared)),
            ("powmod_same_exponent", (cts, q - 1, self.q_squared)),
        ])
        xp, xq = object_array(halves[0]), object_array(halves[1])
        mp = ((xp - 1) // p * self._hp) % p
        mq = ((xq - 1) // q * self._hq) % q
        m = mq + q * (((mp - mq) * self._q_inv_p) % p)
        return [int(v) for v in m.tolist()]

    def raw_encrypt(self, signed_values: Sequence[int], exponent_bytes: np.ndarray | None = None) -> list:
        """Key-owner encryption with CRT (same ciphertexts as the public path for the same r)."""
        pk = self.public_key
        count = len(signed_values)
        counters.add("encryptions", count)
        if exponent_bytes is None:
            exponent_bytes = default_prg().exponent_bytes(count, pk.exponent_bits)
        p2, q2 = self.p_squared, self.q_squared
        g_m = object_array(list(signed_values)) % pk.n * pk.n + 1
        halves = get_kernel().gather([
            ("fixed_base_powmod", ([self._spec_p], [exponent_bytes], (g_m % p2).tolist(), p2)),
            ("fixed_base_powmod", ([self._spec_q], [exponent_bytes], (g_m % q2).tolist(), q2)),
        ])
        xp, xq = object_array(halves[0]), object_array(halves[1])
        return (xq + q2 * (((xp - xq) * self._q2_inv_p2) % p2)).tolist()

    def encrypt(self, values: Any, *, frac_bits: int = 0) -> EncryptedArray:
        encoded = encoding.encode(values, frac_bits, self.public_key.max_int)
        cts = self.raw_encrypt(encoded.ravel().tolist())
        return EncryptedArray(self.public_key, object_array(cts, encoded.shape), frac_bits)


def is_djn_form(p: int, q: int) -> bool:
    """p ≡ q ≡ 3 (mod 4) and gcd(p-1, q-1) = 2."""
    return p % 4 == 3 and q % 4 == 3 and gmpy2.gcd(p - 1, q - 1) == 2


@functools.lru_cache(maxsize=64)
def _derive_hs_cached(n: int) -> int:
    width = (n.bit_length() + 7) // 8
    n_bytes = n.to_bytes(width, "big")
    nn = mpz(n)
    n_squared = nn * nn
    for counter in range(1 << 16):
        # |n| + 128 bits of SHAKE-256, reduced mod n: within 2^-128 of uniform in Z_n
        seed = hashlib.shake_256(_HS_DOMAIN + struct.pack("<I", counter) + n_bytes).digest(width + 16)
        x = mpz(int.from_bytes(seed, "big")) % nn
        if x > 1 and x != nn - 1 and gmpy2.gcd(x, nn) == 1:
            return int(n_squared - gmpy2.powmod(x, 2 * nn, n_squared))
    raise KeyValidationError("no unit of Z_n found for h_s: the modulus shares factors with almost everything")


def derive_hs(n: int) -> mpz:
    """h_s = -x^(2n) mod n^2 with x = hash-to-Z*_n of n under a domain tag (SHAKE-256 with a
    counter, retried until x is a unit other than ±1): the same value for anyone who knows n,
    so a public key is just its modulus and its owner cannot choose h_s (module docstring)."""
    return mpz(_derive_hs_cached(int(n)))


def keygen(bits: int = 2048, *, exponent_bits: int | None = None) -> tuple[PaillierPublicKey, PaillierPrivateKey]:
    """Generate a DJN Paillier key pair with an exactly ``bits``-bit modulus (``bits`` >= 512;
    use 2048 or 3072 for real data).

    ``exponent_bits`` shortens the encryption exponent below the default ceil(bits/2); this rests
    on the short-exponent assumption (a value of at least twice the security level, e.g. 224
    for 2048-bit keys, is the usual choice) and is recorded in the key.
    """
    if not isinstance(bits, int) or bits < MIN_KEY_BITS:
        raise KeyValidationError(f"Paillier keys need at least {MIN_KEY_BITS} bits, got {bits!r}")
    if bits % 2:
        raise KeyValidationError(f"Paillier key size must be even, got {bits}")
    half = bits // 2
    while True:
        p = primes.random_prime(half, residue=3, modulus=4)
        q = primes.random_prime(half, residue=3, modulus=4)
        if p == q or not is_djn_form(p, q):
            continue
        # Keep |p - q| large so Fermat factoring does not apply.
        if abs(p - q).bit_length() < half - 100:
            continue
        n = p * q
        if n.bit_length() == bits:
            break
    public_key = PaillierPublicKey(n, exponent_bits=exponent_bits, djn=True)
    return public_key, PaillierPrivateKey(public_key, p, q)


# -- python-paillier interoperability ---------------------------------------------------------
def _phe():
    try:
        import phe  # type: ignore[import-not-found]
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "python-paillier is needed for interoperability: pip install 'shaper-ppml[interop]'"
        ) from exc
    return phe


def to_phe(obj: Any) -> Any:
    """Convert to python-paillier objects.

    * :class:`PaillierPublicKey` -> ``phe.PaillierPublicKey`` (h_s is not part of a phe key; it
      stays with shaper, see :func:`from_phe`).
    * :class:`PaillierPrivateKey` -> ``phe.PaillierPrivateKey``.
    * :class:`EncryptedArray` -> list (nested like the array's shape) of ``phe.EncryptedNumber``.
      phe scales by powers of 16, so an array whose ``frac_bits`` is not a multiple of 4 is first
      multiplied by 2^(4*ceil(f/4) - f) (exact) to reach exponent -ceil(f/4).
    """
    phe = _phe()
    if isinstance(obj, PaillierPrivateKey):
        pub = phe.PaillierPublicKey(int(obj.public_key.n))
        return phe.PaillierPrivateKey(pub, int(obj.p), int(obj.q))
    if isinstance(obj, PaillierPublicKey):
        return phe.PaillierPublicKey(int(obj.n))
    if isinstance(obj, EncryptedArray):
        if not isinstance(obj.public_key, PaillierPublicKey):
            raise TypeError("only Paillier ciphertexts convert to python-paillier")
        frac = obj.frac_bits
        hex_digits = -(-frac // 4)
        arr = obj.rescaled(4 * hex_digits)
        pub = phe.PaillierPublicKey(int(obj.public_key.n))
        numbers = [phe.EncryptedNumber(pub, int(c), -hex_digits) for c in arr._c.ravel().tolist()]
        return object_array(numbers, arr.shape).tolist() if arr.ndim else numbers[0]
    raise TypeError(f"to_phe cannot convert {type(obj).__name__}")


def from_phe(obj: Any) -> Any:
    """Convert python-paillier objects to shaper's.

    * ``phe.PaillierPublicKey`` -> :class:`PaillierPublicKey` with h_s derived from n
      (:func:`derive_hs`) and a full-length exponent (the primes' form is unknown).
    * ``phe.PaillierPrivateKey`` -> :class:`PaillierPrivateKey` (DJN exponent when its primes have
      the DJN form, full-length otherwise).
    * ``phe.EncryptedNumber`` or a (nested) list of them under one key -> :class:`EncryptedArray`.
      Exponents (powers of 16) are aligned to the smallest, as phe does, and mapped to
      ``frac_bits = -4 * exponent``; positive exponents are multiplied out.
    """
    phe = _phe()
    if isinstance(obj, phe.PaillierPrivateKey):
        p, q = mpz(obj.p), mpz(obj.q)
        n = mpz(obj.public_key.n)
        pk = _KNOWN_KEYS.get(int(n))
        if pk is None:
            pk = PaillierPublicKey(n, djn=is_djn_form(p, q))
        return PaillierPrivateKey(pk, p, q)
    if isinstance(obj, phe.PaillierPublicKey):
        return _foreign_public_key(mpz(obj.n))
    if isinstance(obj, phe.EncryptedNumber) or isinstance(obj, (list, tuple, np.ndarray)):
        arr = np.empty(np.shape(obj) if not isinstance(obj, phe.EncryptedNumber) else (), dtype=object)
        if isinstance(obj, phe.EncryptedNumber):
            arr[()] = obj
        else:
            arr[...] = obj
        numbers = arr.ravel().tolist()
        if not numbers:
            raise ValueError("from_phe needs at least one EncryptedNumber")
        if not all(isinstance(x, phe.EncryptedNumber) for x in numbers):
            raise TypeError("from_phe: every element must be a phe.EncryptedNumber")
        phe_pub = numbers[0].public_key
        if any(x.public_key != phe_pub for x in numbers):
            raise ValueError("from_phe: the EncryptedNumbers use different public keys")
        target = min(min(x.exponent for x in numbers), 0)
        aligned = [x.decrease_exponent_to(target) if x.exponent != target else x for x in numbers]
        pk = _foreign_public_key(mpz(phe_pub.n))
        return pk.ciphertext_array(
            object_array([x.ciphertext(be_secure=False) for x in aligned], arr.shape),
            frac_bits=-4 * target,
        )
    raise TypeError(f"from_phe cannot convert {type(obj).__name__}")


def _foreign_public_key(n: mpz) -> PaillierPublicKey:
    """The public key this process already uses for modulus n (so imports share one key and
    its fixed-base table), or a new one with h_s derived from n and a full-length exponent."""
    key = _KNOWN_KEYS.get(int(n))
    if key is None:
        key = PaillierPublicKey(n, djn=False)
    return key
