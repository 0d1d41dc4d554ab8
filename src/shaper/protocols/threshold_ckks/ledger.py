"""What a party can account for under its threshold key (CKKS, or BGV for
:mod:`shaper.protocols.threshold_bgv`): the joint inputs it helped encrypt, the outputs of the
evaluations it ran itself, and the decryptions it has served.

A party consents to a joint decryption only of ciphertexts in its own ledger, and only while the
key's decryption budget Q lasts. Each entry keeps what the flooding needs: the ciphertext's
worst-case error bound E (||e||_can, :mod:`shaper.crypto.ckks.bounds`), its message bound, level
and scale, and how it came to be (``input`` of a joint encryption, or ``output`` of a named
evaluation over named inputs). Anything else (a ciphertext encrypted by one party alone, a
homomorphic result only one party computed, a crafted one) is not in the ledger and is refused.

The ledger of a key directory is ``ledger.json`` (mode 0600) beside the share. It is rewritten
atomically (write to a temporary file, fsync, rename, fsync of the directory), and the budget is
charged durably *before* anything is opened: a crash can lose a decryption, never give one
twice, and a charge that cannot be written (a full disk) stops the decryption. Re-keying (a new
``shaper fhe keygen``) starts a new ledger with a fresh budget; the old key's parties refuse
once theirs is spent.

**Bound to its key.** A ledger holds the fingerprint of the key it accounts for
(:func:`key_fingerprint`: SHA-256 of the serialised public key), set when the key is made or
first saved. Loading a key directory refuses a ledger bound to another key (a ledger copied in
from another directory, with that key's budget and entries) and refuses a share without a
ledger: a missing ledger is never recreated with a fresh budget beside a key that may have
spent its own. (A ledger written before fingerprints, format 1, is bound to the key it is
first loaded with.)
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...crypto import ckks
from ...crypto.bgv import serial as bgv_serial
from ...crypto.ckks.multiparty import DEFAULT_BUDGET, ciphertext_digest
from ...errors import ConfigError, DecryptionRefused, KeyValidationError
from ...files import remove_stale, write_atomic

__all__ = ["LEDGER_FILE", "SCHEMES", "Entry", "Ledger", "digest_of", "key_fingerprint"]

LEDGER_FILE = "ledger.json"
#: entries kept per ledger (a bound on the file a long-lived key can grow)
MAX_ENTRIES = 1 << 20
#: the schemes a ledger accounts for
SCHEMES = ("ckks", "bgv")
FORMAT = "shaper-threshold-ckks-ledger/2"
FORMATS = ("shaper-threshold-ckks-ledger/1", FORMAT)  # 1: before fingerprints


def key_fingerprint(public_key_bytes: bytes) -> str:
    """The 64-hex fingerprint a ledger is bound to: SHA-256 over a domain label and the
    serialised public key (which names its parameters)."""
    return hashlib.sha256(b"shaper/threshold-key/v1\0" + bytes(public_key_bytes)).hexdigest()


def digest_of(ct: Any) -> str:
    """The 64-hex digest a decryption request names: CKKS's or BGV's, by the ciphertext's type."""
    if isinstance(ct, ckks.Ciphertext):
        return ciphertext_digest(ct)
    return bgv_serial.ciphertext_digest(ct)


@dataclass(frozen=True)
class Entry:
    """One accounted ciphertext: its digest, how it came to be, and its bounds."""

    digest: str
    kind: str  # "input" or "output"
    source: str  # the joint encryption's tag, or the evaluation's name
    error: float  # worst-case ||e||_can
    message: float  # worst-case ||scale * m||_can
    level: int
    scale: float

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "source": self.source, "error": self.error, "message": self.message,
                "level": self.level, "scale": self.scale}


@dataclass
class Ledger:
    """A party's account of its key (see the module docstring). ``path`` None keeps it in memory."""

    budget: int = DEFAULT_BUDGET
    spent: int = 0
    entries: dict[str, Entry] = field(default_factory=dict)
    path: Path | None = None
    #: how the key was generated ("exact" or "local"): its error bounds depend on it
    key_method: str = "exact"
    #: the scheme of the key ("ckks" or "bgv")
    scheme: str = "ckks"
    #: the fingerprint of the key this ledger accounts for (:func:`key_fingerprint`); None until bound
    key: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.budget, int) or self.budget < 1:
            raise ConfigError(f"a decryption budget is a positive integer, got {self.budget!r}")
        if self.scheme not in SCHEMES:
            raise ConfigError(f"a ledger's scheme is one of {', '.join(SCHEMES)}, got {self.scheme!r}")

    def bind(self, fingerprint: str) -> Ledger:
        """Binds this ledger to the key of ``fingerprint`` (kept from the next write on); raises
        :class:`~shaper.errors.KeyValidationError` if it is bound to another key."""
        if self.key is None:
            self.key = fingerprint
        elif self.key != fingerprint:
            where = f"{self.path}" if self.path is not None else "this ledger"
            raise KeyValidationError(f"{where} accounts for another key (fingerprint {self.key[:16]}..., this key's "
                                     f"{fingerprint[:16]}...): refusing to decrypt with another key's budget and "
                                     "entries")
        return self

    @property
    def remaining(self) -> int:
        return max(self.budget - self.spent, 0)

    # -- recording -----------------------------------------------------------------------------
    def record(self, cts: Sequence[ckks.Ciphertext], bounds: Sequence[Any], *, kind: str, source: str) -> list[str]:
        """Accounts for ``cts`` (with their :class:`~shaper.crypto.ckks.bounds.Bound`) as joint
        inputs or as outputs of the evaluation ``source``; returns their digests."""
        if len(cts) != len(bounds):
            raise ValueError(f"{len(cts)} ciphertexts but {len(bounds)} bounds")
        new = []
        for ct, b in zip(cts, bounds, strict=True):
            b = b.bound()  # a per-slot bound as its largest slot
            if b.level != ct.level or abs(b.scale / ct.scale - 1.0) > 2.0 ** -30:
                raise ValueError(f"bound at level {b.level}, scale {b.scale:.4g} does not describe a ciphertext at "
                                 f"level {ct.level}, scale {ct.scale:.4g}")
            d = ciphertext_digest(ct)
            new.append(Entry(d, kind, source, float(b.error), float(b.message), ct.level, float(ct.scale)))
        return self.record_entries(new)

    def record_entries(self, entries: Sequence[Entry]) -> list[str]:
        """Accounts for ready-made entries (what :meth:`record` builds for CKKS, and
        :mod:`shaper.protocols.threshold_bgv` for BGV), durably; returns their digests."""
        if len(self.entries) + len(entries) > MAX_ENTRIES:
            raise ConfigError(f"the ledger holds {len(self.entries)} ciphertexts already; re-key")
        for e in entries:
            if e.kind not in ("input", "output"):
                raise ValueError(f"kind is 'input' or 'output', got {e.kind!r}")
        new = {e.digest: e for e in entries}
        digests = [e.digest for e in entries]
        before = dict(self.entries)
        self.entries.update(new)
        try:
            self._save()
        except BaseException:
            self.entries = before  # what is not on disk is not accounted for
            raise
        return digests

    # -- looking up ----------------------------------------------------------------------------
    def find(self, ct: Any, digest: str | None = None) -> Entry | None:
        return self.entries.get(digest or digest_of(ct))

    def accounted(self, cts: Iterable[Any]) -> list[Entry]:
        """The entries of ``cts``; raises :class:`~shaper.errors.DecryptionRefused` for the first
        one this party cannot account for."""
        out = []
        for k, ct in enumerate(cts):
            d = digest_of(ct)
            entry = self.entries.get(d)
            if entry is None:
                raise DecryptionRefused(
                    f"ciphertext {k} ({d[:16]}...) is neither a joint input nor the output of an evaluation this "
                    "party ran itself: refusing to decrypt a ciphertext of unknown provenance")
            out.append(entry)
        return out

    # -- spending ------------------------------------------------------------------------------
    def check_budget(self, count: int) -> None:
        if self.spent + count > self.budget:
            raise DecryptionRefused(f"the key's decryption budget is spent ({self.spent} of {self.budget} used, "
                                    f"{count} asked): generate a new key (shaper fhe keygen) to decrypt more")

    def spend(self, count: int) -> None:
        """Charges ``count`` decryptions, durable on disk (fsynced) when this returns, which is
        before anything is opened; if the charge cannot be written (a full disk) it raises and
        nothing is charged, so the caller opens nothing."""
        self.check_budget(count)
        self.spent += count
        try:
            self._save()
        except BaseException:
            self.spent -= count
            raise

    # -- disk ----------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "key": self.key, "budget": self.budget, "spent": self.spent,
                "key_method": self.key_method, "scheme": self.scheme,
                "entries": {d: e.as_dict() for d, e in self.entries.items()}}

    def attach(self, directory: str | os.PathLike) -> Ledger:
        """Keeps this ledger in ``directory``/ledger.json from now on (written at once)."""
        self.path = Path(directory) / LEDGER_FILE
        self._save()
        return self

    def _save(self) -> None:
        if self.path is not None:
            write_atomic(self.path, json.dumps(self.to_json(), separators=(",", ":")).encode())

    @classmethod
    def load(cls, directory: str | os.PathLike, *, key: str | None = None, scheme: str = "ckks") -> Ledger:
        """The ledger of a key directory, bound to the key of fingerprint ``key`` when given (a
        ledger of another key is a :class:`~shaper.errors.KeyValidationError`). A directory
        without one is refused (:class:`~shaper.errors.ConfigError`): a fresh budget beside a key
        that may have spent its own would undo the budget. Refuses a ledger kept for another
        ``scheme``."""
        path = Path(directory) / LEDGER_FILE
        remove_stale(directory, LEDGER_FILE)  # a temporary of a write that was killed
        if not path.exists():
            raise ConfigError(f"{Path(directory)} holds no ledger ({LEDGER_FILE}): refusing to start a fresh decryption "
                              "budget beside a key that may have spent its own (restore the ledger from a backup, or "
                              "generate a new key)")
        try:
            data = json.loads(path.read_bytes())
            if data.get("format") not in FORMATS:
                raise ValueError("unknown format")
            bound = data.get("key")
            if bound is not None and (not isinstance(bound, str) or len(bound) != 64
                                      or any(c not in "0123456789abcdef" for c in bound)):
                raise ValueError(f"bad key fingerprint {str(bound)[:20]!r}")
            entries = {}
            for d, e in data["entries"].items():
                if len(d) != 64 or any(c not in "0123456789abcdef" for c in d):
                    raise ValueError(f"bad digest {d[:20]!r}")
                entries[d] = Entry(d, str(e["kind"]), str(e["source"]), float(e["error"]), float(e["message"]),
                                   int(e["level"]), float(e["scale"]))
            ledger = cls(budget=int(data["budget"]), spent=int(data["spent"]), entries=entries,
                         key_method=str(data.get("key_method", "exact")), scheme=str(data.get("scheme", "ckks")),
                         key=bound)
        except (ValueError, KeyError, TypeError, AttributeError, ConfigError) as exc:
            raise ConfigError(f"{path} is not a readable ledger ({exc}); refusing to decrypt with an unknown budget") \
                from None
        if ledger.scheme != scheme:
            raise ConfigError(f"{path} is the ledger of a {ledger.scheme.upper()} key, not of a {scheme.upper()} key")
        ledger.path = path
        if key is not None:
            legacy = ledger.key is None
            ledger.bind(key)
            if legacy:
                ledger._save()  # a format-1 ledger, bound from now on
        return ledger
