"""The key directory of threshold CKKS: what key generation leaves with a party, on disk.

A key directory holds ``params.shpr``, ``public.shpr``, ``relin.shpr``, one ``galois-<g>.shpr``
per rotation key (g its Galois element) and, in a party's own directory, its secret-key share
``secret-share.shpr`` and its ledger ``ledger.json`` (both mode 0600; :mod:`.ledger`). The public files are the same at every party and enough to
encrypt and compute; the share never leaves its party's machine. Directories are written
atomically (:func:`shaper.files.atomic_directory`: every file fsynced, the directory renamed into
place, its parent fsynced) and never overwritten; a save that fails (a full disk) leaves nothing,
and the temporary of one that was killed (it holds the share) is removed by the next save or load
of that directory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ...crypto import ckks
from ...errors import ConfigError, KeyValidationError
from ...files import atomic_directory, remove_stale
from ...net.phases import Phase
from .ledger import LEDGER_FILE, Ledger

__all__ = ["SHARE_FILE", "JointKeys", "PublicKeys"]

SHARE_FILE = "secret-share.shpr"


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

    def save(self, directory: str | os.PathLike, share: ckks.SecretKeyShare | None = None,
             ledger: Ledger | None = None) -> Path:
        """Writes the keys (and a party's ``share`` and ``ledger``, mode 0600) as a new directory,
        atomically: everything goes to a temporary sibling first, renamed into place only once
        complete, so a failure leaves nothing behind. Refuses to overwrite an existing directory.
        The ledger stays attached to the new directory (every later entry and decryption is
        written there)."""
        target = Path(directory)
        remove_stale(target.parent, target.name)  # a killed save's temporary (it holds a share)
        if target.exists():
            raise ConfigError(f"{target} exists already; key directories are never overwritten")
        with atomic_directory(target) as tmp:
            ckks.save(self.params, tmp / "params.shpr")
            ckks.save(self.public, tmp / "public.shpr")
            ckks.save(self.relin, tmp / "relin.shpr")
            for g, key in sorted(self.galois.items()):
                ckks.save(key, tmp / f"galois-{g}.shpr")
            if share is not None:
                ckks.save(share, tmp / SHARE_FILE)
            if ledger is not None:
                ledger.attach(tmp)  # mode 0600, inside the directory renamed into place
        if ledger is not None:
            ledger.path = target / LEDGER_FILE
        return target

    @classmethod
    def load(cls, directory: str | os.PathLike, *, insecure: bool = False) -> PublicKeys:
        """The public material of a key directory (never reads the share). ``insecure``: accept
        a test parameter set (:func:`shaper.crypto.ckks.load`)."""
        d = Path(directory)
        remove_stale(d.parent, d.name)
        if not (d / "params.shpr").is_file():
            raise ConfigError(f"{d} is not a threshold-CKKS key directory (no params.shpr)")
        params = ckks.load(d / "params.shpr", insecure=insecure)
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
    #: what this party can account for and how many decryptions the key has left
    ledger: Ledger = field(default_factory=Ledger)

    def save(self, directory: str | os.PathLike, share: ckks.SecretKeyShare | None = None,
             ledger: Ledger | None = None) -> Path:
        return super().save(directory, share or self.share, ledger or self.ledger)

    @classmethod
    def load(cls, directory: str | os.PathLike, *, insecure: bool = False) -> JointKeys:
        """A party's key directory: the public material and its share."""
        pub = PublicKeys.load(directory, insecure=insecure)
        path = Path(directory) / SHARE_FILE
        if not path.is_file():
            raise ConfigError(f"{directory} holds no secret-key share ({SHARE_FILE}): it is public material only")
        share = ckks.load(path, pub.params)
        if not isinstance(share, ckks.SecretKeyShare):
            raise KeyValidationError(f"{path} is not a secret-key share")
        return cls(pub.params, pub.public, pub.relin, pub.galois, share, ledger=Ledger.load(directory))
