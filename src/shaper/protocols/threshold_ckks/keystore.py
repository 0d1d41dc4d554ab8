"""The key directory of a threshold key (CKKS here; BGV, :mod:`shaper.protocols.threshold_bgv`,
through the same :func:`write_key_directory` / :func:`open_key_directory` /
:func:`load_galois_keys`): what key generation leaves with a party, on disk.

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

import io
import os
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...crypto import ckks
from ...errors import ConfigError, KeyValidationError
from ...files import atomic_directory, check_private_file, remove_stale, write_private
from ...net.phases import Phase
from .ledger import LEDGER_FILE, Ledger, key_fingerprint

__all__ = ["MACS_FILE", "SHARE_FILE", "AuthenticatedShare", "JointKeys", "PublicKeys", "key_rows", "load_galois_keys",
           "open_key_directory", "read_share", "write_key_directory"]

SHARE_FILE = "secret-share.shpr"
#: a key made on the active engine: this party's MAC keys and its MAC shares of s (mode 0600)
MACS_FILE = "secret-macs.npz"


@dataclass(frozen=True, eq=False)
class AuthenticatedShare:
    """What makes a party's share of s usable on the active engine in a later job: its MAC keys
    for every prime of the basis, ``mac_keys`` (R, K_max) uint64 (the engine's
    :meth:`~shaper.protocols.active.ActiveEngine.mac_keys`), and its MAC shares of s under them,
    ``mac`` (K, R, N) in NTT form. As secret as the share (0600); never sent. A later job's
    engine takes the keys back (:meth:`install`), so that s opens, and enters joint
    encryptions and decryptions, MAC-checked."""

    mac_keys: np.ndarray
    mac: np.ndarray

    def validate(self, params: Any) -> None:
        """Checks the arrays against a key's basis and ring (CKKS's primes and N; BGV's basis,
        special primes included, and φ: :func:`key_rows`)."""
        basis, n = key_rows(params)
        primes = np.asarray(basis, dtype=np.uint64)
        r = len(basis)
        if (self.mac_keys.dtype != np.uint64 or self.mac_keys.ndim != 2 or self.mac_keys.shape[0] != r
                or self.mac.dtype != np.uint64 or self.mac.ndim != 3 or self.mac.shape[1:] != (r, n)
                or not 1 <= self.mac.shape[0] <= self.mac_keys.shape[1]):
            raise KeyValidationError(f"MAC shares {self.mac.shape} {self.mac.dtype} and keys {self.mac_keys.shape} "
                                     f"{self.mac_keys.dtype} do not fit a key of {r} primes and N = {n}")
        if np.any(self.mac >= primes[None, :, None]) or np.any(self.mac_keys >= primes[:, None]):
            raise KeyValidationError("MAC shares or keys are not below their primes")

    def install(self, engine: Any, params: Any) -> None:
        """Gives ``engine`` (this party's active engine of a later job) the MAC keys of this
        share (before it uses the key's primes)."""
        engine.install_mac_keys(key_rows(params)[0], self.mac_keys)

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        np.savez(buf, format=np.array([1], np.uint64), mac_keys=self.mac_keys, mac=self.mac)
        return buf.getvalue()

    @classmethod
    def read(cls, path: Path, params: Any) -> AuthenticatedShare:
        """Reads and validates :data:`MACS_FILE` (numpy's npz, never unpickled; mode 0600)."""
        check_private_file(path, "MAC share")
        try:
            with np.load(path, allow_pickle=False) as z:
                if set(z.files) != {"format", "mac_keys", "mac"} or z["format"].tolist() != [1]:
                    raise ValueError(f"unexpected members {sorted(z.files)}")
                out = cls(np.ascontiguousarray(z["mac_keys"]), np.ascontiguousarray(z["mac"]))
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
            raise KeyValidationError(f"{path} is not a readable MAC share ({exc})") from None
        out.validate(params)
        return out


def key_rows(params: Any) -> tuple[tuple[int, ...], int]:
    """(the primes a key's share has rows over, the row length): CKKS's ``primes`` and N, BGV's
    ``basis`` (its chain and special primes) and φ."""
    if hasattr(params, "phi"):
        return tuple(int(q) for q in params.basis), int(params.phi)
    return tuple(int(q) for q in params.primes), int(params.n)


def write_key_directory(directory: str | os.PathLike, files: Iterable[tuple[str, Any]], save: Callable[[Any, Path], Any],
                        share: Any = None, ledger: Ledger | None = None,
                        private: Iterable[tuple[str, bytes]] = ()) -> Path:
    """Writes ``files`` (name, object) with ``save(object, path)``, a party's ``share`` (as
    :data:`SHARE_FILE`) and ``ledger`` (both mode 0600) as a new directory, atomically (module
    docstring). Refuses to overwrite an existing directory; the ledger stays attached to it."""
    target = Path(directory)
    remove_stale(target.parent, target.name)  # a killed save's temporary (it holds a share)
    if target.exists():
        raise ConfigError(f"{target} exists already; key directories are never overwritten")
    with atomic_directory(target) as tmp:
        for name, obj in files:
            save(obj, tmp / name)
        if share is not None:
            save(share, tmp / SHARE_FILE)
        for name, blob in private:
            write_private(tmp / name, blob)
        if ledger is not None:
            ledger.attach(tmp)  # mode 0600, inside the directory renamed into place
    if ledger is not None:
        ledger.path = target / LEDGER_FILE
    return target


def open_key_directory(directory: str | os.PathLike, what: str) -> Path:
    """A key directory to read: the temporary of a killed save removed, ``params.shpr`` present
    (else a :class:`~shaper.errors.ConfigError` saying it is not a ``what`` key directory)."""
    d = Path(directory)
    remove_stale(d.parent, d.name)
    if not (d / "params.shpr").is_file():
        raise ConfigError(f"{d} is not a {what} key directory (no params.shpr)")
    return d


def read_share(directory: str | os.PathLike, load: Callable[[Path], Any], kind: type, what: str) -> Any:
    """A party's share (:data:`SHARE_FILE`) by ``load``, which must give a ``kind``; a
    directory of public material only is a :class:`~shaper.errors.ConfigError`."""
    path = Path(directory) / SHARE_FILE
    if not path.is_file():
        raise ConfigError(f"{directory} holds no secret-key share ({SHARE_FILE}): it is public material only")
    share = load(path)
    if not isinstance(share, kind):
        raise KeyValidationError(f"{path} is not {what}")
    return share


def load_galois_keys(d: Path, load: Callable[[Path], Any], exponent: Callable[[Any], int | None]) -> dict[int, Any]:
    """Every ``galois-<e>.shpr`` of a key directory by ``load``; ``exponent(obj)`` is the
    exponent a loaded key is for (None: not a rotation key), which must be the file's ``e``."""
    galois = {}
    for f in sorted(d.glob("galois-*.shpr")):
        key = load(f)
        e = exponent(key)
        if e is None or f.name != f"galois-{e}.shpr":
            raise KeyValidationError(f"{f} does not hold the rotation key its name says")
        galois[e] = key
    return galois


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

    def fingerprint(self) -> str:
        """The key's fingerprint (:func:`~.ledger.key_fingerprint` of the public key), which its
        ledger is bound to."""
        return key_fingerprint(ckks.to_bytes(self.public))

    def save(self, directory: str | os.PathLike, share: ckks.SecretKeyShare | None = None,
             ledger: Ledger | None = None, macs: AuthenticatedShare | None = None) -> Path:
        """Writes the keys (and a party's ``share``, ``ledger`` and ``macs``, mode 0600) as a new directory,
        atomically: everything goes to a temporary sibling first, renamed into place only once
        complete, so a failure leaves nothing behind. Refuses to overwrite an existing directory.
        The ledger is bound to this key (a ledger of another key is refused) and stays attached
        to the new directory (every later entry and decryption is written there)."""
        if ledger is not None:
            ledger.bind(self.fingerprint())
        files = [("params.shpr", self.params), ("public.shpr", self.public), ("relin.shpr", self.relin)]
        files += [(f"galois-{g}.shpr", key) for g, key in sorted(self.galois.items())]
        private = [] if macs is None else [(MACS_FILE, macs.to_bytes())]
        return write_key_directory(directory, files, ckks.save, share, ledger, private)

    @classmethod
    def load(cls, directory: str | os.PathLike, *, insecure: bool = False) -> PublicKeys:
        """The public material of a key directory (never reads the share). ``insecure``: accept
        a test parameter set (:func:`shaper.crypto.ckks.load`)."""
        d = open_key_directory(directory, "threshold-CKKS")
        params = ckks.load(d / "params.shpr", insecure=insecure)
        galois = load_galois_keys(d, lambda f: ckks.load(f, params),
                                  lambda k: k.galois if isinstance(k, ckks.SwitchingKey) else None)
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
    #: on a key made by the active engine: this party's MAC keys and MAC shares of s
    macs: AuthenticatedShare | None = None

    def __post_init__(self) -> None:
        self.ledger.bind(self.fingerprint())
        if self.macs is not None:
            self.macs.validate(self.params)

    def save(self, directory: str | os.PathLike, share: ckks.SecretKeyShare | None = None,
             ledger: Ledger | None = None, macs: AuthenticatedShare | None = None) -> Path:
        return super().save(directory, share or self.share, ledger or self.ledger, macs or self.macs)

    def secret(self, engine: Any) -> Any:
        """This party's share of s (NTT rows over every prime) as a
        :class:`~.polys.SharedRows` of ``engine``: on the active engine with its MAC shares, the
        MAC keys given to the engine first (a key made on the passive engine has none, and is
        refused there with a :class:`~shaper.errors.ConfigError`)."""
        from .polys import SharedRows, active

        if not active(engine):
            return SharedRows(engine, self.share.ntt, None, tuple(self.params.primes))
        if self.macs is None:
            raise ConfigError("this key was made on the passive engine (it has no MAC shares of s); the active engine "
                              "needs a key made on it (shaper fhe keygen --security active)")
        self.macs.install(engine, self.params)
        return SharedRows(engine, self.share.ntt, self.macs.mac, tuple(self.params.primes))

    @classmethod
    def load(cls, directory: str | os.PathLike, *, insecure: bool = False) -> JointKeys:
        """A party's key directory: the public material and its share."""
        pub = PublicKeys.load(directory, insecure=insecure)
        share = read_share(directory, lambda f: ckks.load(f, pub.params), ckks.SecretKeyShare, "a secret-key share")
        path = Path(directory) / MACS_FILE
        macs = AuthenticatedShare.read(path, pub.params) if path.is_file() else None
        return cls(pub.params, pub.public, pub.relin, pub.galois, share,
                   ledger=Ledger.load(directory, key=pub.fingerprint()), macs=macs)
