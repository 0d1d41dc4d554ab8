"""The key directory of threshold GHS (BGV): the same layout, atomic writing and ledger as
threshold CKKS's (:mod:`shaper.protocols.threshold_ckks.keystore`, whose helpers write and read
it), with BGV's objects: ``params.shpr``, ``public.shpr``, ``relin.shpr``, one
``galois-<u>.shpr`` per automorphism key (u the exponent of X ↦ X^u), and in a party's own
directory its share ``secret-share.shpr`` and ``ledger.json`` (both 0600). Directories are never
overwritten; a save that fails leaves nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...crypto.bgv import scheme, serial
from ...crypto.bgv.multiparty import SecretKeyShare
from ...crypto.bgv.params import Parameters
from ...errors import ConfigError, KeyValidationError
from ...net.phases import Phase
from ..threshold_ckks.keystore import (
    MACS_FILE,
    AuthenticatedShare,
    load_galois_keys,
    open_key_directory,
    read_share,
    write_key_directory,
)
from ..threshold_ckks.ledger import Ledger, key_fingerprint

__all__ = ["JointKeys", "PublicKeys"]


@dataclass(eq=False)
class PublicKeys:
    """The opened BGV keys: what anyone may hold to encrypt and compute (no secret in it)."""

    params: Parameters
    public: scheme.PublicKey
    relin: scheme.SwitchingKey
    galois: dict[int, scheme.SwitchingKey]

    def evaluator(self) -> scheme.Evaluator:
        return scheme.Evaluator(self.params, self.relin, self.galois)

    def sizes(self) -> dict[str, int]:
        """Serialised bytes of each key (independent of the number of parties)."""
        out = {"public key": len(serial.to_bytes(self.public)),
               "relinearisation key": len(serial.to_bytes(serial.SwitchingKeyFor(0, self.relin)))}
        if self.galois:
            out["automorphism keys"] = sum(len(serial.to_bytes(serial.SwitchingKeyFor(u, k)))
                                           for u, k in self.galois.items())
        return out

    def fingerprint(self) -> str:
        """The key's fingerprint (of the serialised public key), which its ledger is bound to."""
        return key_fingerprint(serial.to_bytes(self.public))

    def save(self, directory: str | os.PathLike, share: SecretKeyShare | None = None,
             ledger: Ledger | None = None, macs: AuthenticatedShare | None = None) -> Path:
        """Writes the keys (and a party's ``share``, ``ledger`` and, for a key made on the active
        engine, ``macs``: all mode 0600) as a new directory, atomically; refuses to overwrite
        one. The ledger is bound to this key."""
        if ledger is not None:
            ledger.bind(self.fingerprint())
        files = [("params.shpr", self.params), ("public.shpr", self.public),
                 ("relin.shpr", serial.SwitchingKeyFor(0, self.relin))]
        files += [(f"galois-{u}.shpr", serial.SwitchingKeyFor(u, k)) for u, k in sorted(self.galois.items())]
        private = [] if macs is None else [(MACS_FILE, macs.to_bytes())]
        return write_key_directory(directory, files, serial.save, share, ledger, private)

    @classmethod
    def load(cls, directory: str | os.PathLike, *, insecure: bool = False) -> PublicKeys:
        """The public material of a BGV key directory (never reads the share). ``insecure``:
        accept a test parameter set."""
        d = open_key_directory(directory, "threshold-BGV")
        params = serial.load(d / "params.shpr", insecure=insecure)
        if not isinstance(params, Parameters):
            raise KeyValidationError(f"{d / 'params.shpr'} does not hold BGV parameters")
        galois = load_galois_keys(d, lambda f: serial.load(f, params),
                                  lambda k: k.exponent if isinstance(k, serial.SwitchingKeyFor) and k.exponent
                                  else None)
        public, relin = serial.load(d / "public.shpr", params), serial.load(d / "relin.shpr", params)
        if not isinstance(public, scheme.PublicKey) or not isinstance(relin, serial.SwitchingKeyFor) \
                or relin.exponent != 0:
            raise KeyValidationError(f"{d}: public.shpr / relin.shpr do not hold a public and a relinearisation key")
        return cls(params, public, relin.key, {u: k.key for u, k in galois.items()})


@dataclass(eq=False)
class JointKeys(PublicKeys):
    """What key generation leaves with every party: the opened keys, its own share, its ledger
    (the ciphertexts it can account for and the decryptions left), and each phase's time and
    traffic at this party."""

    share: SecretKeyShare = field(default=None)  # type: ignore[assignment]
    phases: list[Phase] = field(default_factory=list)
    ledger: Ledger = field(default_factory=lambda: Ledger(scheme="bgv"))
    #: on a key made by the active engine: this party's MAC keys and MAC shares of s (evaluation
    #: rows over the basis, special primes included)
    macs: AuthenticatedShare | None = None

    def __post_init__(self) -> None:
        self.ledger.bind(self.fingerprint())
        if self.macs is not None:
            self.macs.validate(self.params)

    def save(self, directory: str | os.PathLike, share: SecretKeyShare | None = None,
             ledger: Ledger | None = None, macs: AuthenticatedShare | None = None) -> Path:
        return super().save(directory, share or self.share, ledger or self.ledger, macs or self.macs)

    def secret(self, engine: Any) -> Any:
        """This party's share of s (evaluation rows over the basis) as a
        :class:`~shaper.protocols.threshold_ckks.polys.SharedRows` of ``engine``: on the active
        engine with its MAC shares, the MAC keys given to the engine first (a key made on the
        passive engine has none and is refused there; on the passive engine, the plain rows)."""
        from ..threshold_ckks.polys import SharedRows, active

        basis = tuple(int(q) for q in self.params.basis)
        if not active(engine):
            return SharedRows(engine, self.share.rows, None, basis)
        if self.macs is None:
            raise ConfigError("this BGV key was made on the passive engine (it has no MAC shares of s); the active "
                              "engine needs a key made on it")
        self.macs.install(engine, self.params)
        return SharedRows(engine, self.share.rows, self.macs.mac, basis)

    @classmethod
    def load(cls, directory: str | os.PathLike, *, insecure: bool = False) -> JointKeys:
        """A party's BGV key directory: the public material, its share, its ledger and (a key made
        on the active engine) its MAC shares."""
        pub = PublicKeys.load(directory, insecure=insecure)
        share = read_share(directory, lambda f: serial.load(f, pub.params), SecretKeyShare, "a BGV secret-key share")
        path = Path(directory) / MACS_FILE
        macs = AuthenticatedShare.read(path, pub.params) if path.is_file() else None
        return cls(pub.params, pub.public, pub.relin, pub.galois, share,
                   ledger=Ledger.load(directory, key=pub.fingerprint(), scheme="bgv"), macs=macs)
