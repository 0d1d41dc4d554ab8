"""Network configuration: one validated object, and the parties file that describes a job.

A parties file (TOML) lists every party of a job; every host gets the same file. On several
hosts each party pins every party's certificate fingerprint (``shaper identity new`` makes a
party's key and certificate on its own machine and prints the fingerprint; ``docs/net.md``)::

    session_id = "fraud-model-2026"        # both sides must agree; guards against cross-talk
    security = "active"                    # the MPC engine: "active" (default for jobs holding a
                                           # joint key) or "passive"; every party must agree

    [network]                              # all optional
    timeout = "300s"                       # every receive gives up after this
    connect_timeout = "60s"                # how long to keep dialling a peer that is not up yet
    handshake_timeout = "10s"              # a TCP connection must finish TLS and the hello in this
    keepalive = "15s"                      # silence before TCP probes a link (a dead peer shows in ~2x)
    max_pending = 8                        # connections a listener authenticates at once
    max_message = "1GiB"                   # the largest one message a peer may announce
    max_buffered = "1GiB"                  # bytes a peer may have queued here, received but not read
    bandwidth = "40mbit"                   # shaping, emulates a WAN inside the channel
    latency = "40ms"                       # one way
    max_frame = "4MiB"                     # large arrays travel in frames of at most this size
    insecure = false                       # true = plain TCP without TLS (tests, trusted LANs)

    [[party]]
    name = "bank"
    host = "10.0.0.1"
    port = 7100
    fingerprint = "sha256:3f1c...e9"       # the bank's certificate, as `shaper identity new` printed it
    cert = "identity/bank.pem"             # only the party itself needs its own cert and key
    key = "identity/bank.key"              # (or pass --key)

    [party.executor]                       # optional: where this party's big batches run
    kind = "ray"                           # "local" (default) or "ray" (see shaper.kernels.cluster)
    address = "10.0.0.5:6379"              # the party's own Ray cluster; omit for RAY_ADDRESS/local

When every party has a ``fingerprint``, no CA is needed: a peer must present exactly the pinned
certificate for the name it claims. Without fingerprints the file names a CA that signed every
party's certificate (``[tls] ca = "certs/ca.pem"``, each party with a ``cert``), as
``shaper certs`` writes for runs on one machine; fingerprints given alongside a CA are checked
too. Relative paths are resolved against the file's directory. Party names and fingerprints must
be unique.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError

#: the MPC engines a job can run on: the active one (MACs, checks, abort on any deviation) and the
#: passive one (what the seed papers measure, faster, safe only while every party follows it)
SECURITY_MODES = ("active", "passive")

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(us|µs|ms|s|m|h)?\s*$")
_RATE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(bit|kbit|mbit|gbit|bps|kbps|mbps|gbps)?\s*$", re.I)
_FINGERPRINT = re.compile(r"^sha256:((?:[0-9a-f]{2}:?){31}[0-9a-f]{2})$")
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(b|kb|mb|gb|kib|mib|gib)?\s*$", re.I)
_DUR_UNITS = {None: 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "m": 60.0, "h": 3600.0}
_RATE_UNITS = {None: 1.0, "bit": 1.0, "bps": 1.0, "kbit": 1e3, "kbps": 1e3, "mbit": 1e6, "mbps": 1e6,
               "gbit": 1e9, "gbps": 1e9}
_SIZE_UNITS = {None: 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


def parse_duration(value: Any, what: str = "duration") -> float:
    """Seconds from ``300``, ``"300s"``, ``"40ms"``, ``"2m"``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and (m := _DURATION.match(value)):
        seconds = float(m.group(1)) * _DUR_UNITS[m.group(2)]
    else:
        raise ConfigError(f"{what} must be a number of seconds or like '40ms', '300s'; got {value!r}")
    if seconds < 0:
        raise ConfigError(f"{what} must not be negative, got {value!r}")
    return seconds


def parse_rate(value: Any, what: str = "bandwidth") -> float:
    """Bits per second from ``"40mbit"``, ``"1gbit"``, ``"100kbps"`` or a number (bit/s)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        rate = float(value)
    elif isinstance(value, str) and (m := _RATE.match(value)):
        rate = float(m.group(1)) * _RATE_UNITS[(m.group(2) or "").lower() or None]
    else:
        raise ConfigError(f"{what} must look like '40mbit' or '1gbit' (bits per second); got {value!r}")
    if rate <= 0:
        raise ConfigError(f"{what} must be positive, got {value!r}")
    return rate


def parse_size(value: Any, what: str = "size") -> int:
    """Bytes from ``"4MiB"``, ``"1MB"`` or a number."""
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    elif isinstance(value, str) and (m := _SIZE.match(value)):
        size = int(float(m.group(1)) * _SIZE_UNITS[(m.group(2) or "").lower() or None])
    else:
        raise ConfigError(f"{what} must be a byte count or like '4MiB'; got {value!r}")
    if size <= 0:
        raise ConfigError(f"{what} must be positive, got {value!r}")
    return size


def check_party_name(name: Any) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(
            f"party name {name!r} is invalid: use 1-63 letters, digits, '_', '.', '-' starting with a "
            "letter or digit"
        )
    return name


def parse_fingerprint(value: Any, what: str = "fingerprint") -> str:
    """A certificate fingerprint as ``shaper identity`` prints it (``sha256:`` and 64 hex digits),
    normalised: case and ``:`` between byte pairs do not matter."""
    text = value.strip().lower() if isinstance(value, str) else ""
    m = _FINGERPRINT.match(text)
    if not m:
        raise ConfigError(f"{what} must look like 'sha256:' followed by 64 hex digits "
                          f"(as `shaper identity show` prints it), got {value!r}")
    return "sha256:" + m.group(1).replace(":", "")


@dataclass(frozen=True)
class NetConfig:
    """Everything about how parties talk. Validated on construction."""

    timeout: float = 300.0
    connect_timeout: float = 60.0
    handshake_timeout: float = 10.0  # a connection must finish TLS and the hello within this
    max_frame: int = 4 << 20
    max_message: int = 1 << 30  # the largest one message a peer may announce
    max_meta: int = 1 << 20
    max_buffered: int = 1 << 30  # bytes a peer may have queued here, received but not yet read
    keepalive: float = 15.0  # seconds of silence before TCP probes a link (a dead peer shows in ~2x)
    max_pending: int = 8  # unauthenticated connections handled at once by a listener
    bandwidth: float | None = None  # bits per second, per direction of each link
    latency: float = 0.0  # seconds, one way
    insecure: bool = False
    session_id: str = "shaper"

    def __post_init__(self) -> None:
        for name in ("timeout", "connect_timeout", "handshake_timeout"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and value > 0):
                raise ConfigError(f"{name} must be a positive number of seconds, got {value!r}")
        if not (isinstance(self.max_frame, int) and 1024 <= self.max_frame <= 1 << 30):
            raise ConfigError(f"max_frame must be between 1 KiB and 1 GiB, got {self.max_frame!r}")
        if not (isinstance(self.max_message, int) and self.max_message >= self.max_frame):
            raise ConfigError(f"max_message must be at least max_frame, got {self.max_message!r}")
        if not (isinstance(self.max_buffered, int) and self.max_buffered >= self.max_message):
            raise ConfigError(f"max_buffered must be at least max_message, got {self.max_buffered!r}")
        if not (isinstance(self.keepalive, (int, float)) and 1 <= self.keepalive <= 3600):
            raise ConfigError(f"keepalive must be 1..3600 seconds, got {self.keepalive!r}")
        if not (isinstance(self.max_pending, int) and 1 <= self.max_pending <= 1024):
            raise ConfigError(f"max_pending must be 1..1024 connections, got {self.max_pending!r}")
        if self.bandwidth is not None and not self.bandwidth > 0:
            raise ConfigError(f"bandwidth must be positive bits/s, got {self.bandwidth!r}")
        if not (isinstance(self.latency, (int, float)) and 0 <= self.latency < 60):
            raise ConfigError(f"latency must be in [0, 60) seconds, got {self.latency!r}")
        if not isinstance(self.session_id, str) or not 0 < len(self.session_id) <= 128:
            raise ConfigError("session_id must be a non-empty string of at most 128 characters")

    def with_(self, **changes: Any) -> "NetConfig":
        return replace(self, **changes)

    @property
    def shaped(self) -> bool:
        return self.bandwidth is not None or self.latency > 0

    @classmethod
    def from_mapping(cls, raw: dict, base: "NetConfig | None" = None) -> "NetConfig":
        """Build from a parties file's ``[network]`` table (strings with units allowed)."""
        base = base or cls()
        known = {"timeout", "connect_timeout", "handshake_timeout", "max_frame", "max_message", "max_buffered", "keepalive",
                 "max_pending", "bandwidth", "latency", "insecure"}
        unknown = set(raw) - known
        if unknown:
            raise ConfigError(f"unknown [network] settings: {', '.join(sorted(unknown))}")
        changes: dict[str, Any] = {}
        for key in ("timeout", "connect_timeout", "handshake_timeout", "latency", "keepalive"):
            if key in raw:
                changes[key] = parse_duration(raw[key], key)
        for key in ("max_frame", "max_message", "max_buffered"):
            if key in raw:
                changes[key] = parse_size(raw[key], key)
        if "max_pending" in raw:
            changes["max_pending"] = raw["max_pending"]
        if "bandwidth" in raw:
            changes["bandwidth"] = None if raw["bandwidth"] in (None, "", "none") else parse_rate(raw["bandwidth"])
        if "insecure" in raw:
            if not isinstance(raw["insecure"], bool):
                raise ConfigError("insecure must be true or false")
            changes["insecure"] = raw["insecure"]
        return replace(base, **changes)


@dataclass(frozen=True)
class Party:
    """One party of a job: where it listens and which certificate identifies it (``fingerprint``:
    the SHA-256 of the certificate the party must present, when identities are pinned)."""

    name: str
    host: str
    port: int
    cert: Path | None = None
    key: Path | None = None
    executor: Any = None  # shaper.kernels.ExecutorSettings from [party.executor], or None
    fingerprint: str | None = None

    def __post_init__(self) -> None:
        check_party_name(self.name)
        if self.fingerprint is not None:
            object.__setattr__(self, "fingerprint",
                               parse_fingerprint(self.fingerprint, f"party {self.name!r}: fingerprint"))
        if not isinstance(self.host, str) or not self.host:
            raise ConfigError(f"party {self.name!r}: host must be a non-empty string")
        if not (isinstance(self.port, int) and 0 <= self.port < 65536):
            raise ConfigError(f"party {self.name!r}: port must be 0..65535, got {self.port!r}")


@dataclass(frozen=True)
class PartiesFile:
    """A parsed parties file."""

    parties: tuple[Party, ...]
    config: NetConfig
    ca: Path | None = None
    path: Path | None = field(default=None, compare=False)
    #: the MPC engine the file asks for ("active" or "passive"); None: the job's default
    security: str | None = None

    @property
    def pinned(self) -> bool:
        """Whether every party's certificate fingerprint is pinned (then no CA is needed)."""
        return all(p.fingerprint is not None for p in self.parties)

    def index(self, name: str) -> int:
        for i, p in enumerate(self.parties):
            if p.name == name:
                return i
        raise ConfigError(f"party {name!r} is not in the parties file (has: {', '.join(p.name for p in self.parties)})")


def load_parties(path: str | Path, base: NetConfig | None = None) -> PartiesFile:
    """Parse and validate a parties file (see the module docstring for the format)."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ConfigError(f"parties file {path} does not exist") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"parties file {path} is not valid TOML: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"parties file {path} is not UTF-8 text: {exc.reason} at byte {exc.start}") from exc
    except OSError as exc:
        raise ConfigError(f"parties file {path} cannot be read: {exc.strerror or exc}") from exc
    root = path.parent

    def resolve(value: Any, what: str) -> Path | None:
        if value is None:
            return None
        if not isinstance(value, str):
            raise ConfigError(f"{what} must be a path string, got {value!r}")
        p = Path(value)
        return p if p.is_absolute() else root / p

    unknown = set(raw) - {"session_id", "security", "network", "tls", "party"}
    if unknown:
        raise ConfigError(f"parties file {path}: unknown top-level keys {', '.join(sorted(unknown))}")
    config = NetConfig.from_mapping(raw.get("network", {}), base)
    if "session_id" in raw:
        config = replace(config, session_id=raw["session_id"])
    entries = raw.get("party")
    if not isinstance(entries, list) or len(entries) < 2:
        raise ConfigError(f"parties file {path} must list at least two [[party]] entries")
    parties = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ConfigError(f"[[party]] entry {i} must be a table")
        extra = set(entry) - {"name", "host", "port", "cert", "key", "executor", "fingerprint"}
        if extra:
            raise ConfigError(f"[[party]] entry {i}: unknown keys {', '.join(sorted(extra))}")
        for req in ("name", "host", "port"):
            if req not in entry:
                raise ConfigError(f"[[party]] entry {i} lacks '{req}'")
        executor = None
        if "executor" in entry:
            from ..kernels import ExecutorSettings

            table = entry["executor"]
            if isinstance(table, dict) and "task_timeout" in table:
                table = {**table, "task_timeout": parse_duration(table["task_timeout"], "executor task_timeout")}
            executor = ExecutorSettings.from_mapping(table, f"[[party]] entry {i} executor")
        parties.append(Party(entry["name"], entry["host"], entry["port"],
                             resolve(entry.get("cert"), "cert"), resolve(entry.get("key"), "key"), executor,
                             entry.get("fingerprint")))
    names = [p.name for p in parties]
    if len(set(names)) != len(names):
        raise ConfigError(f"parties file {path}: duplicate party names in {names}")
    pins = [p.fingerprint for p in parties if p.fingerprint is not None]
    if len(set(pins)) != len(pins):
        twins = sorted({p.name for p in parties if p.fingerprint is not None and pins.count(p.fingerprint) > 1})
        raise ConfigError(f"parties file {path}: parties {', '.join(map(repr, twins))} pin the same fingerprint "
                          "(each party needs its own identity)")
    tls = raw.get("tls", {})
    if not isinstance(tls, dict) or set(tls) - {"ca"}:
        raise ConfigError(f"parties file {path}: [tls] takes only 'ca'")
    ca = resolve(tls.get("ca"), "tls.ca")
    if not config.insecure and ca is None:
        unpinned = [p.name for p in parties if p.fingerprint is None]
        if unpinned:
            raise ConfigError(f"parties file {path}: no fingerprint for {', '.join(map(repr, unpinned))}: pin every "
                              "party's fingerprint (`shaper identity new` prints it), or name a CA in [tls] ca")
    if not config.insecure and ca is not None:
        for p in parties:
            if p.cert is None and p.fingerprint is None:
                raise ConfigError(f"parties file {path}: party {p.name!r} has no cert")
    security = raw.get("security")
    if security is not None and security not in SECURITY_MODES:
        raise ConfigError(f"parties file {path}: security must be one of {', '.join(map(repr, SECURITY_MODES))}, "
                          f"got {security!r}")
    return PartiesFile(tuple(parties), config, ca, path, security)
