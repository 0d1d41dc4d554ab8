"""Parser harnesses: one entry per Python parser that reads bytes from a peer or a file.

Each :class:`Target` has ``run(data)``, which feeds one input to the parser and returns normally
when the parser accepted it or refused it with one of the exception types it documents
(``allowed``: :mod:`shaper.errors` subclasses, plus the few builtins a docstring names). Any
other exception, a hang, or a large allocation is a finding. ``run`` also checks what an accepted
input gives (for example that an accepted array descriptor can be allocated, or that an honest
stream of sealed frames decodes to its plaintext).

The same targets run three ways: as bounded pytest tests (``tests/fuzz/test_parsers.py``,
hypothesis byte mutation of the seeds, deterministic), under atheris for campaigns
(``fuzz/python_fuzz.py``, started by ``fuzz/run``), and over their committed seeds
(``fuzz/corpus/py_<name>/``, written by ``fuzz/seeds.py`` from :meth:`Target.make_seeds`).
"""

from __future__ import annotations

import functools
import io
import os
import socket
import struct
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from shaper import errors as E

from . import fixtures

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "fuzz" / "corpus"


class Finding(AssertionError):
    """A parser misbehaved on an input (not a documented refusal)."""


@dataclass(frozen=True)
class Target:
    name: str
    run: Callable[[bytes], None]
    allowed: tuple[type[BaseException], ...]
    make_seeds: Callable[[], list[bytes]]
    doc: str = ""

    def seeds(self) -> list[bytes]:
        """The committed seeds when present (deterministic), else freshly made ones."""
        d = CORPUS / f"py_{self.name}"
        files = sorted(d.iterdir()) if d.is_dir() else []
        return [f.read_bytes() for f in files] or self.make_seeds()

    def check(self, data: bytes) -> None:
        """One input: returns, or raises the finding (the unexpected exception itself)."""
        try:
            self.run(data)
        except self.allowed:
            pass


# -- fixtures -----------------------------------------------------------------------------------
@functools.cache
def paillier_keys():
    from shaper.crypto import serialization

    sk = serialization.key_from_bytes(fixtures.PAILLIER_512)
    return sk.public_key, sk


@functools.cache
def ou_keys():
    from shaper.crypto import serialization

    sk = serialization.key_from_bytes(fixtures.OU_512)
    return sk.public_key, sk


@functools.cache
def ckks_params():
    from shaper.crypto import ckks

    return ckks.Parameters.from_literal(64, [50, 40, 40], 50, 40, insecure=True)


def _tmpdir() -> Path:
    d = Path(tempfile.gettempdir()) / f"shaper-fuzz-{os.getpid()}"
    d.mkdir(exist_ok=True)
    return d


def _file(data: bytes, name: str) -> Path:
    p = _tmpdir() / name
    p.write_bytes(data)
    return p


# -- wire frames (net/frames.py) --------------------------------------------------------------
def _frames_run(data: bytes) -> None:
    """The frame header, a tag, then a metadata / array-descriptor payload, as the channel's
    reader parses them."""
    from shaper.net import frames as F

    if len(data) < F.HEADER_SIZE:
        data = data + bytes(F.HEADER_SIZE - len(data))
    kind, _, _ = F.parse_header(data[:F.HEADER_SIZE], "peer")
    rest = data[F.HEADER_SIZE:]
    if kind in (F.META, F.ABORT, F.HELLO):
        F.parse_json(rest, "peer")
    elif kind == F.ARRAY:
        limit = 1 << 30
        dtype, shape, total = F.parse_array_descriptor(rest, "peer", limit)
        if total > limit:
            raise Finding(f"descriptor of {total} bytes passed a {limit}-byte limit")
        if dtype.kind not in "biufc" or dtype.byteorder == ">":
            raise Finding(f"disallowed dtype {dtype} accepted")
        try:
            arr = np.empty(shape, dtype=dtype)  # what the channel does next
        except (ValueError, MemoryError) as exc:
            raise Finding(f"accepted array descriptor {dtype.str} {shape} cannot be allocated: "
                          f"{type(exc).__name__}: {exc}") from exc
        if arr.nbytes != total:
            raise Finding(f"descriptor total {total} != {arr.nbytes} bytes of {shape}")


def _frames_seeds() -> list[bytes]:
    from shaper.net import frames as F

    out = []
    for kind, payload in [(F.META, b'{"a":[1,2,3]}'), (F.ABORT, b'{"error":"boom"}'), (F.HELLO, b'{"name":"x"}'),
                          (F.CLOSE, b""), (F.BYTES, struct.pack("<Q", 10)), (F.CHUNK, b"abc")]:
        out.append(F.header(kind, b"", len(payload)) + payload)
    for arr in [np.zeros((2, 3), "<u8"), np.zeros((0, 4), "<f8"), np.zeros((), "?"), np.zeros((1, 1, 2), "<c16")]:
        _, desc = F.array_descriptor(arr)
        out.append(F.header(F.ARRAY, b"", len(desc)) + desc)
    return out


# -- a channel's reader over a socket (net/channel.py) -------------------------------------------
def _channel_run(data: bytes) -> None:
    """The whole stream handed to a real :class:`Channel` reader over a socket pair. On a plain
    socket pair no OSError or ValueError is legitimate, so the reader's catch-all branches
    ("receiving from party ... failed", "connection to party ... failed", "out of memory") are
    findings; a FrameError or a PeerError naming the peer's close or abort is the refusal."""
    from shaper.net.channel import Channel
    from shaper.net.config import NetConfig
    from shaper.net.stats import Stats

    feed, theirs = socket.socketpair()
    out_mine, out_theirs = socket.socketpair()
    ch = Channel("me", "peer", out_mine, theirs, NetConfig(timeout=5.0, max_message=1 << 26, max_buffered=1 << 26),
                 Stats())
    try:
        feed.settimeout(2.0)
        try:
            feed.sendall(data)
        except (TimeoutError, OSError):
            pass  # the reader stopped reading (a refusal): the rest is never read
        feed.shutdown(socket.SHUT_WR)
        ch._reader.join(timeout=3.0)
        if ch._reader.is_alive():
            raise Finding("the channel reader still runs 3 s after the stream ended (a hang)")
        failure = ch._failure
        if failure is not None:
            text = str(failure)
            if not isinstance(failure, (E.FrameError, E.PeerError)) or any(
                    s in text for s in ("receiving from party", "connection to party", "out of memory")):
                raise Finding(f"channel reader failed with {type(failure).__name__}: {text}")
        for tag in list(ch._queues):
            ch.recv(tag, timeout=1.0)
    finally:
        ch.close()
        for s in (feed, theirs, out_mine, out_theirs):
            s.close()


def _channel_seeds() -> list[bytes]:
    from shaper.net import frames as F

    def chunked(kind: int, head_payload: bytes, body: bytes, tag: bytes = b"t") -> bytes:
        out = F.header(kind, tag, len(head_payload)) + head_payload
        for i in range(0, len(body), 5):
            piece = body[i:i + 5]
            out += F.header(F.CHUNK, tag, len(piece)) + piece
        return out

    meta = b'{"k":1}'
    arr = np.arange(6, dtype="<i4").reshape(2, 3)
    _, desc = F.array_descriptor(arr)
    return [
        F.header(F.META, b"m", len(meta)) + meta + F.header(F.CLOSE, b"", 0),
        chunked(F.BYTES, struct.pack("<Q", 12), b"hello world!") + F.header(F.CLOSE, b"", 0),
        chunked(F.ARRAY, desc, arr.tobytes(), b"arr"),
        F.header(F.ABORT, b"", 16) + b'{"error":"boom"}',
        chunked(F.BYTES, struct.pack("<Q", 12), b"hello"),
    ]


# -- sealed links (net/sealed.py) ---------------------------------------------------------------
_SEAL_KEY = bytes(range(16))


def _sealed_stream(data: bytes) -> tuple[bytes, bytes]:
    """Input bytes -> (wire stream, plaintext of its leading honest frames). Ops: 0 an honest
    frame, 1 a replay of the previous frame, 2 an honest frame with one byte flipped, 3 a raw
    length field and raw bytes, 4 a truncated frame; the stream stops at the first dishonest op."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from shaper.net import sealed as S

    aead = AESGCM(_SEAL_KEY)
    r = io.BytesIO(data)
    stream, plain, counter, last, honest = b"", b"", 0, b"", True

    def byte() -> int:
        b = r.read(1)
        return b[0] if b else -1

    while (op := byte()) >= 0:
        size = int.from_bytes(r.read(2).ljust(2, b"\0"), "little")
        if op % 5 in (0, 2, 4):
            # an honest sender never sends an empty frame (sendall splits non-empty data)
            size = 1 + size % 64 if byte() % 16 else min(S.FRAME, size * 16 + 1)
            body = bytes((i * 7 + counter) & 0xff for i in range(size))
            head = struct.pack(">I", size + S.TAG)
            frame = head + aead.encrypt(counter.to_bytes(12, "big"), body, head)
            counter += 1
            if op % 5 == 2:
                at = byte() % len(frame)
                frame = frame[:at] + bytes([frame[at] ^ (1 << (byte() & 7) or 1)]) + frame[at + 1:]
                honest = False
            elif op % 5 == 4:
                frame = frame[:byte() % len(frame)]
                honest = False
            elif honest:
                plain += body
            stream += frame
            last = frame
        elif op % 5 == 1:
            stream += last
            honest = honest and not last
        else:
            raw = struct.pack(">I", int.from_bytes(r.read(4).ljust(4, b"\0"), "big")) + r.read(size % 256)
            stream += raw
            honest = False
        if not honest:
            break
    return stream, plain


#: FrameError for a bad frame; PeerError (ConnectionResetError before the hardening) for a
#: peer that closed in the middle of a frame
_SEALED_ERRORS = (E.FrameError, E.PeerError, ConnectionResetError)


def _sealed_run(data: bytes) -> None:
    """A crafted stream of AES-GCM frames read through :class:`SealedSocket`: an honest stream
    decodes to its plaintext; any replayed, altered, oversized or truncated frame ends the
    read with FrameError (or PeerError: the peer closed in the middle of a frame)."""
    from shaper.net.sealed import SealedSocket

    stream, plain = _sealed_stream(data)
    ours, theirs = socket.socketpair()
    writer = threading.Thread(target=lambda: (theirs.sendall(stream), theirs.shutdown(socket.SHUT_WR)), daemon=True)
    writer.start()
    sealed = SealedSocket(ours, b"\0" * 16, _SEAL_KEY, "peer")
    ours.settimeout(5.0)
    got = bytearray()
    buf = bytearray(1 << 16)
    try:
        while True:
            try:
                n = sealed.recv_into(buf, len(buf))
            except _SEALED_ERRORS:
                if not got.startswith(plain[:len(got)]) or len(got) < len(plain):
                    raise Finding("honest frames before the bad one were not all delivered intact") from None
                raise
            if n == 0:
                break
            got += buf[:n]
        if bytes(got) != plain:
            raise Finding(f"sealed stream decoded to {len(got)} bytes, expected the {len(plain)} honest bytes")
    finally:
        writer.join(timeout=5.0)
        ours.close()
        theirs.close()


def _sealed_seeds() -> list[bytes]:
    return [
        bytes([0, 5, 0, 1]), bytes([0, 40, 0, 1, 0, 3, 0, 1]), bytes([0, 5, 0, 1, 1, 0, 0]),
        bytes([2, 9, 0, 1, 3, 2]), bytes([3, 0, 0, 0, 0, 0, 15]), bytes([3, 0, 0, 0, 16, 0, 17]),
        bytes([0, 3, 0, 0]), bytes([4, 20, 0, 1, 7]), bytes([0, 1, 0, 1, 0, 2, 0, 1, 0, 3, 0, 1]),
    ]


# -- AHE keys, arrays, packed arrays (crypto/serialization.py, crypto/wire.py, crypto/ahe.py) ---
_KEY_ERRORS = (E.SerializationError, E.KeyValidationError, E.KeyMismatchError)


def _keys_run(data: bytes) -> None:
    from shaper.crypto import serialization

    serialization.key_from_bytes(data)


def _keys_seeds() -> list[bytes]:
    from shaper.crypto import serialization

    out = []
    for pk, sk in (paillier_keys(), ou_keys()):
        out += [serialization.key_to_bytes(pk), serialization.key_to_bytes(sk)]
    return out


def _keys_json_run(data: bytes) -> None:
    from shaper.crypto import serialization

    serialization.key_from_json(data)


def _keys_json_seeds() -> list[bytes]:
    from shaper.crypto import serialization

    out = []
    for pk, sk in (paillier_keys(), ou_keys()):
        out += [serialization.key_to_json(pk).encode(), serialization.key_to_json(sk).encode()]
    return out


def _key_file_run(data: bytes) -> None:
    """``load_key`` on a file holding the input (binary or JSON, found from the first bytes)."""
    import warnings

    from shaper.crypto import serialization

    p = _file(data, "key")
    os.chmod(p, 0o600)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        serialization.load_key(p)


_ARRAY_ERRORS = (E.SerializationError, E.KeyMismatchError, E.InvalidCiphertextError)


def _array_run(data: bytes) -> None:
    from shaper.crypto.ahe import EncryptedArray

    pk, _ = paillier_keys()
    EncryptedArray.from_bytes(data, pk)


def _array_seeds() -> list[bytes]:
    pk, _ = paillier_keys()
    out = []
    for shape in [(3,), (2, 2), (), (0, 5), (1, 1, 1)]:
        vals = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
        out.append(pk.encrypt(vals).to_bytes())
    out.append(pk.encrypt(np.array([0.5, -1.25]), frac_bits=16).to_bytes()) if _accepts_frac(pk) else None
    return out


def _accepts_frac(pk) -> bool:
    try:
        pk.encrypt(np.array([0.5]), frac_bits=16)
    except TypeError:
        return False
    return True


def _packed_run(data: bytes) -> None:
    from shaper.crypto.packing import PackedArray

    pk, _ = paillier_keys()
    PackedArray.from_bytes(data, pk)


def _packed_seeds() -> list[bytes]:
    from shaper.crypto import packing

    pk, _ = paillier_keys()
    out = []
    for n in (1, 7, 20):
        enc = pk.encrypt(np.arange(n, dtype=np.int64))
        out.append(packing.pack(enc, 16).to_bytes())
    return out


# -- CKKS (crypto/ckks/serial.py) ----------------------------------------------------------------
def _ckks_run(data: bytes) -> None:
    from shaper.crypto import ckks

    obj = _ckks_from_bytes(data, ckks_params())
    if isinstance(obj, ckks.Parameters):
        again = _ckks_from_bytes(ckks.to_bytes(obj), None)
        if again.fingerprint != obj.fingerprint:
            raise Finding("CKKS parameters do not round-trip")


def _ckks_from_bytes(data: bytes, params):
    """``ckks.from_bytes`` allowing test parameter sets (the fixture's) where it takes the flag."""
    import inspect

    from shaper.crypto import ckks

    if "insecure" in inspect.signature(ckks.from_bytes).parameters:
        return ckks.from_bytes(data, params, insecure=True)
    return ckks.from_bytes(data, params)


def _ckks_seeds() -> list[bytes]:
    from shaper.crypto import ckks

    params = ckks_params()
    keys = ckks.KeySet(params, rotations=[1], conjugation=False)
    enc = ckks.Encoder(params)
    pt = enc.encode(np.arange(4, dtype=float))
    out = [ckks.to_bytes(params), ckks.to_bytes(keys.secret), ckks.to_bytes(keys.public), ckks.to_bytes(keys.relin),
           ckks.to_bytes(ckks.encrypt(keys.public, pt)), ckks.to_bytes(ckks.encrypt(keys.secret, pt))]
    out += [ckks.to_bytes(g) for g in (keys.galois.values() if isinstance(keys.galois, dict) else [])][:1]
    return out


# -- the parties file (net/config.load_parties) ---------------------------------------------------
def _parties_run(data: bytes) -> None:
    from shaper.net.config import load_parties

    load_parties(_file(data, "parties.toml"))


def _parties_seeds() -> list[bytes]:
    return [
        (b'[[party]]\nname = "alice"\nhost = "127.0.0.1"\nport = 7001\nfingerprint = "sha256:abababababababababababababababababababababababababababababababab"\n\n'
        b'[[party]]\nname = "bob"\nhost = "127.0.0.1"\nport = 7002\nfingerprint = "sha256:cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd"\n'),
        (b'[network]\ninsecure = true\n[[party]]\nname = "a"\nhost = "h"\nport = 1\n'
        b'[[party]]\nname = "b"\nhost = "h"\nport = 2\n[[party]]\nname = "c"\nhost = "h"\nport = 3\n'),
        (b'session_id = "run-1"\n[network]\ntimeout = "30s"\nbandwidth = "1Gbit"\nlatency = "5ms"\n'
        b'max_message = "64MiB"\n[tls]\nca = "ca.pem"\n'
        b'[[party]]\nname = "a"\nhost = "h1"\nport = 1\ncert = "a.pem"\nkey = "a.key"\n'
        b'[[party]]\nname = "b"\nhost = "h2"\nport = 2\n[party.executor]\nkind = "local"\n'),
        (b'[[party]]\nname = "a"\nhost = "h"\nport = 1\nfingerprint = "sha256:abababababababababababababababababababababababababababababababab"\n'
        b'[[party]]\nname = "a"\nhost = "h"\nport = 70000\nfingerprint = "sha256:abababababababababababababababababababababababababababababababab"\n'),
    ]


# -- Bristol Fashion circuits (circuits/bristol.py) ------------------------------------------------
def _bristol_run(data: bytes) -> None:
    from shaper.circuits import bristol

    bristol.load(_file(data, "circuit.txt"))


def _bristol_seeds() -> list[bytes]:
    from shaper.circuits import bristol

    adder = b"2 4\n2 1 1\n1 1\n\n2 1 0 1 2 XOR\n2 1 2 1 3 AND\n"
    small = b"4 8\n2 2 2\n1 2\n\n2 1 0 2 4 XOR\n2 1 1 3 5 AND\n1 1 4 6 INV\n1 1 5 7 EQW\n"
    out = [adder, small, b"1 3\n1 1\n1 1\n\n1 1 0 2 INV\n", b"1 3\n2 1 1\n1 1\n\n2 1 0 1 2 AND\n"]
    for name in bristol.bundled()[:2]:
        text = bristol.resolve(name).read_bytes()
        if len(text) < 4096:
            out.append(text)
    return out


# -- data tables (ml/data.py) ------------------------------------------------------------------------
def _table_run(data: bytes) -> None:
    from shaper.ml.data import read_table

    label = "y" if data[:1] in (b"i", b"x") else None
    read_table(_file(data, "table.csv"), id_column="id", label_column=label)


def _table_seeds() -> list[bytes]:
    return [
        b"id,x1,x2,y\na,1.5,2,1\nb,-3,4e2,0\nc,,7,1\n",
        b"id,region,y\n1,north,0\n2,south,1\n",
        b'id,"quoted, name",y\n"x""y",3,1\n',
        b"x,id\n1,a\n2,a\n",
        b"id\n",
    ]


# -- OT-based PSI's setup message (protocols/psi/okvs.parse_setup) -------------------------------------
def _okvs_setup_run(data: bytes) -> None:
    """4 bytes of R's set size (little-endian, below 2^28), then the setup message's JSON (the
    channel has already refused what is not JSON); an accepted message must describe an OKVS
    the native core accepts and whose size S can afford."""
    import json

    from shaper.protocols.psi import okvs

    n_r = int.from_bytes(data[:4].ljust(4, b"\0"), "little") % (1 << 28)
    try:
        setup = json.loads(data[4:].decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return
    seed, params = okvs.parse_setup(setup, n_r)
    clusters, capacity, sparse, dense = params
    if len(seed) != 16 or not 1 <= dense <= 64 or clusters * (sparse + dense) > 3 * max(n_r, 1) + 64 * clusters:
        raise Finding(f"accepted an OKVS of {params} for {n_r} ids")


def _okvs_setup_seeds() -> list[bytes]:
    from shaper.protocols.psi import okvs

    out = []
    for n in (1, 30, 16384, 16385, 1 << 20):
        message = {"seed": "ab" * 16, "params": list(okvs.params_for(n))}
        out.append(n.to_bytes(4, "little") + json_bytes(message))
    out.append((30).to_bytes(4, "little") + b'{"seed": "00", "params": [1, 30, 81, 47]}')
    out.append((30).to_bytes(4, "little") + b'{"seed": "' + b"ab" * 16 + b'", "params": [1, 29, 81, 47]}')
    return out


def json_bytes(value: object) -> bytes:
    import json

    return json.dumps(value).encode()


TARGETS: dict[str, Target] = {t.name: t for t in [
    Target("frames", _frames_run, (E.FrameError,), _frames_seeds, "frame header, metadata JSON, array descriptor"),
    Target("channel", _channel_run, (), _channel_seeds, "a Channel reader fed a raw stream"),
    Target("sealed", _sealed_run, _SEALED_ERRORS, _sealed_seeds, "AES-GCM sealed frames"),
    Target("ahe_key", _keys_run, _KEY_ERRORS, _keys_seeds, "Paillier / OU keys, binary"),
    Target("ahe_key_json", _keys_json_run, _KEY_ERRORS, _keys_json_seeds, "Paillier / OU keys, JWK JSON"),
    Target("key_file", _key_file_run, _KEY_ERRORS, lambda: _keys_seeds() + _keys_json_seeds(), "load_key on a file"),
    Target("ahe_array", _array_run, _ARRAY_ERRORS, _array_seeds, "EncryptedArray.from_bytes"),
    Target("packed_array", _packed_run, _ARRAY_ERRORS + (E.PackingError,), _packed_seeds, "PackedArray.from_bytes"),
    Target("ckks", _ckks_run, (E.SerializationError,), _ckks_seeds, "CKKS parameters, keys, ciphertexts"),
    Target("parties", _parties_run, (E.ConfigError,), _parties_seeds, "load_parties (TOML)"),
    Target("bristol", _bristol_run, (E.ShaperError,), _bristol_seeds, "Bristol Fashion circuits"),
    Target("table", _table_run, (E.ConfigError,), _table_seeds, "read_table, CSV"),
    Target("okvs_setup", _okvs_setup_run, (E.FrameError,), _okvs_setup_seeds,
           "OT-based PSI's seed and OKVS parameters"),
]}
