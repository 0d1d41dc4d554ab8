"""Setting up the links between parties: listen, dial with retries, TLS, handshake.

Party i listens; every party with a higher index dials it, twice: one link for each direction.
A dialer retries refused connections until ``connect_timeout`` (the peer may simply not be up
yet); once a connection is accepted, the TLS handshake and the hello must finish within
``handshake_timeout``, so a port held by another program (or a stuck process) is reported in
seconds, by cause. After TLS, the dialer sends a HELLO (protocol name and version, session id,
its name, the name it expects, the link's direction) and the listener answers; both sides check
the version, the session id, and that the certificate is that of the party named (its common
name, and with pinned identities its exact fingerprint, :mod:`shaper.net.tls`). Anything else
is a :class:`~shaper.errors.HandshakeError` that says which peer and why.

With pinned identities the dialer first announces its certificate in the clear; the listener
refuses at once, with a reason the dialer reports, a certificate that is not pinned for the
party it names, and otherwise runs the handshake trusting only that certificate.

A party that fails while links are being set up tells the peers it is already linked to: it
sends ABORT with its error on those links, then closes them. A party that cannot listen (its
port is taken) still dials the parties it would dial anyway, for a few seconds, to tell them
why it stops. While a party waits for further links it watches the ones it already has (a peer
only ever *reads* from the link this party writes to, so anything arriving there means the peer
has gone), and stops at once with :class:`~shaper.errors.PeerError` naming that peer and, when
it sent one, its reason. A listener likewise stops at once when an authenticated party of the
job presents a mismatched session id, version, party order or name (that party is misconfigured
and stops too, so waiting longer cannot help); connections it cannot authenticate (a foreign CA,
an unpinned certificate) are refused, the refusal tells the dialer why, and they only add to the
report given at ``connect_timeout``: a stranger must not be able to stop a job.

Resources: a listener authenticates at most ``max_pending`` connections at once (the others wait
in the kernel's backlog), each within ``handshake_timeout``; every link has TCP keepalive
(``keepalive`` seconds of silence, then probes), so a half-open link shows up as a dead peer.
"""

from __future__ import annotations

import errno
import json
import select
import socket
import ssl
import threading
import time
from typing import Callable

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from ..errors import ConfigError, FrameError, HandshakeError, PeerError
from . import frames as F
from .config import NetConfig, Party
from .sealed import SealedSocket, seal
from .tls import (
    TLSFiles,
    check_own_certificate,
    check_pinned,
    client_context,
    common_name,
    fingerprint,
    load_certificate,
    peer_certificate,
    peer_identity,
    pinned_client_context,
    pinned_party,
    pinned_server_context,
    server_context,
)

PROTOCOL = "shaper-net"
WRITES = "dialer-writes"  # on this link the dialer writes and the listener reads
READS = "listener-writes"
# Pinned identities: before TLS the dialer announces its certificate, the listener answers.
ANNOUNCE, ACCEPT, REFUSE = b"SHID", b"SHOK", b"SHNO"
MAX_CERT = 8192  # bytes of an announced certificate (ours are ~600)


def _tune(sock: socket.socket) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        try:
            sock.setsockopt(socket.SOL_SOCKET, opt, 4 << 20)
        except OSError:
            pass


def _keepalive(sock: socket.socket, seconds: float) -> None:
    """TCP keepalive: after ``seconds`` of silence the kernel probes the peer every third of that,
    three times, so a half-open link (peer host gone, cable cut) fails within about 2x
    ``seconds`` instead of when the receive timeout runs out."""
    idle, interval = max(1, int(seconds)), max(1, int(seconds / 3))
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for name, value in (("TCP_KEEPIDLE", idle), ("TCP_KEEPALIVE", idle), ("TCP_KEEPINTVL", interval),
                            ("TCP_KEEPCNT", 3)):
            option = getattr(socket, name, None)  # TCP_KEEPALIVE is macOS's name for the idle time
            if option is not None:
                sock.setsockopt(socket.IPPROTO_TCP, option, value)
    except OSError:
        pass  # best effort: the receive timeout still bounds every wait


def listen(party: Party) -> socket.socket:
    """Bind this party's listening socket (port 0 picks a free port).

    A loopback host binds loopback only; any other host binds every interface of the host's
    address family (the advertised address may be a NAT or DNS name not present locally)."""
    try:
        family = socket.getaddrinfo(party.host, None, type=socket.SOCK_STREAM)[0][0]
    except socket.gaierror:
        family = socket.AF_INET6 if ":" in party.host else socket.AF_INET
    loopback = party.host in ("127.0.0.1", "localhost", "::1")
    host = party.host if loopback else ("::" if family == socket.AF_INET6 else "")
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, party.port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise HandshakeError(
                f"party {party.name!r} cannot listen: port {party.port} on {host or party.host} is taken (another "
                "process listens there: a second copy of this party, or another program)") from exc
        raise HandshakeError(f"party {party.name!r} cannot listen on {host or '*'}:{party.port}: {exc}") from exc
    sock.listen(64)
    return sock


def _announce(sock: socket.socket, der: bytes) -> None:
    sock.sendall(ANNOUNCE + len(der).to_bytes(2, "big") + der)


def _read_announcement(sock: socket.socket) -> bytes:
    """The certificate a dialer announced, or HandshakeError saying what came instead."""
    head = _exact(sock, 6)
    if head[:1] == b"\x16":  # a TLS record: the dialer checks against a CA
        raise HandshakeError("the peer started TLS without announcing its certificate: its parties file names a "
                             "CA where ours pins fingerprints (the parties files differ)")
    if head[:4] != ANNOUNCE:
        raise HandshakeError(f"the peer does not speak {PROTOCOL} (it sent {head!r})")
    length = int.from_bytes(head[4:], "big")
    if not 0 < length <= MAX_CERT:
        raise HandshakeError(f"the peer announced a certificate of {length} bytes (at most {MAX_CERT})")
    return _exact(sock, length)


def _answer(sock: socket.socket, problem: str | None) -> None:
    if problem is None:
        sock.sendall(ACCEPT)
    else:
        text = problem.encode()[:2000]
        sock.sendall(REFUSE + len(text).to_bytes(2, "big") + text)


def _read_answer(sock: socket.socket) -> str | None:
    """None if the listener accepted the announced certificate, else its reason."""
    head = _exact(sock, 4)
    if head == ACCEPT:
        return None
    if head != REFUSE:
        raise HandshakeError(f"it does not speak {PROTOCOL} (it answered {head!r})")
    length = int.from_bytes(_exact(sock, 2), "big")
    return _exact(sock, length).decode(errors="replace")


def _send_json(sock: socket.socket, value: dict) -> None:
    payload = json.dumps(value).encode()
    sock.sendall(F.header(F.HELLO, b"", len(payload)) + payload)


def _recv_json(sock: socket.socket, who: str) -> dict:
    head = _exact(sock, F.HEADER_SIZE)
    kind, tag_len, length = F.parse_header(head, who)
    if kind != F.HELLO or tag_len or length > 4096:
        raise FrameError(f"expected a handshake from {who}, got a {F.KIND_NAMES.get(kind, kind)} frame")
    doc = F.parse_json(_exact(sock, length), who)
    if not isinstance(doc, dict):
        raise FrameError(f"malformed handshake from {who}")
    return doc


def _exact(sock: socket.socket, size: int) -> bytes:
    buf = bytearray()
    while len(buf) < size:
        chunk = sock.recv(size - len(buf))
        if not chunk:
            raise ConnectionError("connection closed during the handshake")
        buf += chunk
    return bytes(buf)


class _Trust:
    """How this party proves who it is and checks its peers: a job CA, or pinned fingerprints
    (``tls.ca is None``; then every party must have one). Checks this party's own certificate
    first, so a party that cannot work fails at start-up, locally."""

    def __init__(self, tls: TLSFiles, parties: list[Party], me: str) -> None:
        self.files = tls
        self.pins = {p.name: p.fingerprint for p in parties if p.fingerprint is not None}
        self.pinned = tls.ca is None
        if self.pinned:
            unpinned = [p.name for p in parties if p.fingerprint is None]
            if unpinned:
                raise ConfigError(f"no CA is given, so every party needs a pinned fingerprint; "
                                  f"{', '.join(map(repr, unpinned))} has none")
        tls.check()
        check_own_certificate(tls, me, self.pins.get(me))
        self.own_der = load_certificate(tls.cert).public_bytes(serialization.Encoding.DER) if self.pinned else b""
        self._client: ssl.SSLContext | None = None
        self._servers: dict[str, ssl.SSLContext] = {}
        self._lock = threading.Lock()

    def client(self) -> ssl.SSLContext:
        with self._lock:
            if self._client is None:
                self._client = pinned_client_context(self.files) if self.pinned else client_context(self.files)
            return self._client

    def server(self, peer_der: bytes | None = None) -> ssl.SSLContext:
        """The listener's context: the CA's, or one trusting exactly the pinned ``peer_der``."""
        key = fingerprint(peer_der) if peer_der is not None else ""
        with self._lock:
            if key not in self._servers:
                self._servers[key] = (pinned_server_context(self.files, peer_der) if peer_der is not None
                                      else server_context(self.files))
            return self._servers[key]

    def screen(self, der: bytes, acceptable: list[str], who: str) -> str:
        """The pinned party whose certificate a dialer announced, or HandshakeError naming the
        problem (unpinned, another name, expired); the TLS handshake that follows proves the
        dialer holds that certificate's key."""
        try:
            cert = x509.load_der_x509_certificate(der)
        except ValueError as exc:
            raise HandshakeError(f"{who} announced a malformed certificate") from exc
        owner = pinned_party(der, self.pins)
        if owner is None:
            name = common_name(cert)
            pinned = f", but party {name!r} is pinned to {self.pins[name]}" if name in self.pins else \
                ", which is pinned for no party of this job"
            raise HandshakeError(f"{who} presented a certificate for {name!r} with fingerprint {fingerprint(der)}"
                                 f"{pinned}")
        check_pinned(der, owner, self.pins, who)
        if owner not in acceptable:
            raise HandshakeError(f"{who} presented the certificate of party {owner!r}, which does not dial this "
                                 f"party (this party accepts {acceptable})")
        return owner


def connect(me: int, parties: list[Party], config: NetConfig, tls: TLSFiles | None,
            listener: socket.socket | None = None) -> dict[str, tuple[socket.socket, socket.socket]]:
    """Links to every peer: ``{peer: (socket this party writes to, socket it reads from)}``."""
    if (tls is None) != config.insecure:
        raise HandshakeError("TLS files are required unless the configuration is explicitly insecure")
    names = [p.name for p in parties]
    my = parties[me]
    trust = _Trust(tls, parties, my.name) if tls is not None else None
    deadline = time.monotonic() + config.connect_timeout
    links: dict[tuple[str, str], socket.socket] = {}
    errors: list[str] = []
    lock = threading.Condition()
    finished = [False]  # set when connect() returns or gives up: late arrivals are refused
    reserved: set[tuple[str, str]] = set()  # accepted links whose reply is being sent
    fatal: list[Exception] = []  # problems that end the set-up at once
    finished_peers: set[str] = set()  # linked peers that may already have finished their job
    expected_in = {(p.name, role) for p in parties[me + 1:] for role in (WRITES, READS)}
    own_listener = listener is None and bool(expected_in)
    if own_listener:
        try:
            listener = listen(my)
        except HandshakeError as exc:
            _tell_and_stop(my, parties[:me], config, trust, f"{type(exc).__name__}: {exc}")
            raise
    client_ctx = trust.client() if trust is not None and me > 0 else None
    slots = threading.BoundedSemaphore(config.max_pending)  # unauthenticated connections in hand

    def accept_loop() -> None:
        assert listener is not None
        while True:
            with lock:
                if finished[0] or expected_in <= set(links) or time.monotonic() > deadline:
                    return
            if not slots.acquire(timeout=0.2):
                continue  # max_pending handshakes under way: the next connection waits in the backlog
            try:
                listener.settimeout(max(0.05, min(0.5, deadline - time.monotonic())))
                raw, addr = listener.accept()
            except socket.timeout:
                slots.release()
                continue
            except OSError:
                slots.release()
                return
            threading.Thread(target=handle_incoming, args=(raw, addr), daemon=True).start()

    def handle_incoming(raw: socket.socket, addr: tuple) -> None:
        try:
            authenticate(raw, addr)
        finally:
            slots.release()

    def authenticate(raw: socket.socket, addr: tuple) -> None:
        who = f"connection from {addr[0]}:{addr[1]}"
        sock = None
        identity = None
        try:
            _tune(raw)
            _keepalive(raw, config.keepalive)
            raw.settimeout(max(0.1, min(config.handshake_timeout, deadline - time.monotonic())))
            if trust is not None and trust.pinned:
                der = _read_announcement(raw)
                try:
                    owner = trust.screen(der, names[me + 1:], who)
                except HandshakeError as exc:
                    _answer(raw, str(exc))
                    raise
                _answer(raw, None)
                sock = trust.server(der).wrap_socket(raw, server_side=True)
                if peer_certificate(sock) != der:  # the only trust anchor is der: cannot happen
                    raise HandshakeError(f"{who} presented another certificate than it announced")
                identity = owner
            elif trust is not None:
                if raw.recv(1, socket.MSG_PEEK) == ANNOUNCE[:1]:
                    _answer(raw, f"party {my.name!r} checks certificates against a CA, but this party pins "
                                 "fingerprints: the parties files differ")
                    raise HandshakeError(f"{who} pins fingerprints, but this party's parties file names a CA "
                                         "(the parties files differ)")
                sock = trust.server().wrap_socket(raw, server_side=True)
                identity = peer_identity(sock)
            else:
                sock = raw
            hello = _recv_json(sock, who)
            claimed = hello.get("from")
            problem = None
            if hello.get("proto") != PROTOCOL or hello.get("version") != F.VERSION:
                problem = (f"protocol mismatch: peer speaks {hello.get('proto')} v{hello.get('version')}, "
                           f"we speak {PROTOCOL} v{F.VERSION}")
            elif hello.get("session") != config.session_id:
                problem = (f"session id mismatch: peer is in session {hello.get('session')!r}, "
                           f"we are in {config.session_id!r}")
            elif hello.get("to") != my.name:
                problem = f"peer expected party {hello.get('to')!r} but reached {my.name!r}"
            elif claimed not in names[me + 1:]:
                problem = f"unexpected party {claimed!r} (this party accepts {names[me + 1:]})"
            elif hello.get("role") not in (WRITES, READS):
                problem = "unknown link direction"
            elif trust is not None and identity != claimed:
                problem = f"certificate identifies {identity!r}, but the peer claims to be {claimed!r}"
            elif trust is not None and not trust.pinned and claimed in trust.pins:
                try:
                    check_pinned(peer_certificate(sock), claimed, trust.pins, f"party {claimed!r}")
                except HandshakeError as exc:
                    problem = str(exc)
            key = (claimed, hello.get("role"))
            # A party of this job, proven by its certificate, that is configured differently (another
            # session, version, party order, or it runs under another party's name): it stops on our
            # refusal, so there is nothing left to wait for.
            hopeless = problem is not None and identity in names and identity != my.name
            with lock:
                if problem is None and (key in links or key in reserved):
                    problem = f"duplicate connection from party {claimed!r}"
                if problem is None and finished[0]:
                    problem = "the listener has stopped waiting for connections"
                if problem is None:
                    reserved.add(key)
            # Reply before the link is handed over: once registered, this party may start
            # writing application frames on it, and the reply must come first.
            _send_json(sock, {"ok": problem is None, "error": problem, "name": my.name})
            if problem is not None:
                if hopeless:
                    with lock:
                        fatal.append(HandshakeError(f"party {identity!r} cannot join the job: {problem}"))
                        lock.notify_all()
                raise HandshakeError(f"{who}: {problem}")
            if trust is not None:  # this end writes on the link when the dialer reads on it
                sock = seal(sock, writer=hello.get("role") == READS, peer=claimed)
            with lock:
                if finished[0]:
                    raise HandshakeError(f"{who}: arrived after the listener stopped waiting")
                links[key] = sock
                lock.notify_all()
        except (OSError, ssl.SSLError, FrameError, HandshakeError) as exc:
            if isinstance(exc, TimeoutError):
                exc = HandshakeError(f"did not finish the handshake within {config.handshake_timeout:g}s")
            text = str(exc) if str(exc).startswith(who) else f"{who}: {exc}"
            with lock:
                errors.append(text)
                lock.notify_all()
            for s_ in {id(raw): raw, id(sock): sock}.values() if sock is not None else (raw,):
                try:
                    s_.close()
                except OSError:
                    pass

    acceptor = threading.Thread(target=accept_loop, name="shaper-accept", daemon=True) if expected_in else None
    if acceptor:
        acceptor.start()

    def both_links(peer: str) -> bool:
        """Whether ``peer`` has both links with this party, counting accepted links whose reply
        has gone out: from then on the peer may finish connecting and start writing."""
        with lock:
            return all((peer, role) in links or (peer, role) in reserved for role in (WRITES, READS))

    def check_linked() -> None:
        with lock:
            if fatal:
                raise fatal[0]
            snapshot = dict(links)
        _check_linked(snapshot, names, me, finished_peers, both_links)

    try:
        for peer in parties[:me]:
            for role in (WRITES, READS):
                sock = _dial(my, peer, role, config, client_ctx, deadline, check_linked, trust)
                with lock:
                    links[(peer.name, role)] = sock
        if acceptor:
            while True:
                with lock:
                    if fatal or expected_in <= set(links) or time.monotonic() >= deadline:
                        break
                    lock.wait(min(0.2, max(0.0, deadline - time.monotonic())))
                check_linked()
            check_linked()
            with lock:
                missing = sorted({name for name, role in expected_in - set(links)})
            if missing:
                detail = "; ".join(errors[-5:]) if errors else "no connection attempt arrived"
                raise HandshakeError(
                    f"party {my.name!r} waited {config.connect_timeout:.0f}s for {', '.join(map(repr, missing))} "
                    f"to connect to port {listener.getsockname()[1] if listener else '?'}: {detail}"
                )
    except BaseException as exc:
        with lock:
            finished[0] = True
            leftovers = dict(links)
        reason = "interrupted" if isinstance(exc, KeyboardInterrupt) else f"{type(exc).__name__}: {exc}"
        for sock in leftovers.values():  # both links: the peer may be reading either by now
            _send_abort(sock, reason)
        for sock in leftovers.values():
            sock.close()
        raise
    finally:
        with lock:
            finished[0] = True
        if own_listener and listener is not None:
            listener.close()
    out: dict[str, tuple[socket.socket, socket.socket]] = {}
    for p in parties:
        if p.name == my.name:
            continue
        dialed = names.index(p.name) < me
        w, r = links[(p.name, WRITES)], links[(p.name, READS)]
        out[p.name] = (w, r) if dialed else (r, w)
    return out


def _tell_and_stop(me: Party, peers: list[Party], config: NetConfig, trust: _Trust | None, reason: str) -> None:
    """Best effort, for a party that cannot take part (its port is taken): dial the parties it
    would dial anyway and send each an ABORT with ``reason``, so they stop at once instead of
    waiting for it. Gives up after ``handshake_timeout`` in all (a peer may not be up yet)."""
    if not peers:
        return
    deadline = time.monotonic() + min(config.handshake_timeout, config.connect_timeout)
    ctx = trust.client() if trust is not None else None
    for peer in peers:
        if time.monotonic() >= deadline:
            return
        try:
            sock = _dial(me, peer, WRITES, config, ctx, deadline, trust=trust)
        except (OSError, ssl.SSLError, FrameError, HandshakeError, PeerError, ConfigError):
            continue
        _send_abort(sock, reason)
        sock.close()


def _dial(me: Party, peer: Party, role: str, config: NetConfig, ctx: ssl.SSLContext | None,
          deadline: float, check: Callable[[], None] = lambda: None, trust: _Trust | None = None) -> socket.socket:
    """One link to ``peer``: retry refused connections until ``deadline``; once connected, TLS
    (``ctx``, checked as ``trust`` says: a CA, or the peer's pinned fingerprint) and the hello
    within ``handshake_timeout``. Any failure after the connection is final."""
    delay = 0.05
    last: Exception | None = None
    where = f"party {peer.name!r} at {peer.host}:{peer.port}"
    pinned = trust is not None and trust.pinned
    while True:
        check()  # a peer linked earlier may have gone while this one is not up yet
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise HandshakeError(
                f"party {me.name!r} could not reach party {peer.name!r} at {peer.host}:{peer.port} within "
                f"{config.connect_timeout:.0f}s: {last} (is it running, and is the port open?)"
            )
        try:
            raw = socket.create_connection((peer.host, peer.port), timeout=min(remaining, 10.0))
        except OSError as exc:
            last = exc
            if exc.errno not in (errno.ECONNREFUSED, errno.ECONNRESET, errno.EHOSTUNREACH, errno.ENETUNREACH,
                                 errno.ETIMEDOUT, None) and not isinstance(exc, socket.timeout):
                raise HandshakeError(f"cannot connect to party {peer.name!r} at {peer.host}:{peer.port}: {exc}") from exc
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 1.5, 1.0)
            continue
        sock: socket.socket = raw

        def close() -> None:  # the TLS socket owns the connection once wrapped
            for each in (sock, raw):
                try:
                    each.close()
                except OSError:
                    pass

        try:
            _tune(raw)
            _keepalive(raw, config.keepalive)
            raw.settimeout(max(0.1, min(config.handshake_timeout, deadline - time.monotonic())))
            if pinned:
                assert trust is not None
                _announce(raw, trust.own_der)
                refusal = _read_answer(raw)
                if refusal is not None:
                    raise HandshakeError(f"{where} refused this party's certificate: {refusal}")
            sock = ctx.wrap_socket(raw) if ctx is not None else raw
            if ctx is not None:
                if pinned:
                    assert trust is not None
                    check_pinned(peer_certificate(sock), peer.name, trust.pins, where)  # type: ignore[arg-type]
                else:
                    identity = peer_identity(sock)  # type: ignore[arg-type]
                    if identity != peer.name:
                        raise HandshakeError(f"{where} presented a certificate for {identity!r}")
                    if trust is not None and peer.name in trust.pins:
                        check_pinned(peer_certificate(sock), peer.name, trust.pins, where)  # type: ignore[arg-type]
            _send_json(sock, {"proto": PROTOCOL, "version": F.VERSION, "session": config.session_id,
                              "from": me.name, "to": peer.name, "role": role})
            reply = _recv_json(sock, f"party {peer.name!r}")
            if not reply.get("ok"):
                raise HandshakeError(f"party {peer.name!r} refused the connection: {reply.get('error')}")
            return seal(sock, writer=role == WRITES, peer=peer.name) if ctx is not None else sock
        except TimeoutError as exc:
            close()
            raise HandshakeError(
                f"{where} accepted the connection but did not finish the handshake within "
                f"{config.handshake_timeout:g}s (is another program, or a stuck process, listening on that port?)"
            ) from exc
        except ssl.SSLError as exc:
            close()
            if isinstance(exc, ssl.SSLEOFError):
                raise HandshakeError(f"{where} closed the connection during the TLS handshake (a program that does "
                                     "not speak shaper, or parties files that differ: a CA against pinned "
                                     "fingerprints?)") from exc
            hint = ("its certificate or ours is not the pinned one?" if pinned
                    else "certificates from different CAs, or a wrong certificate?")
            raise HandshakeError(
                f"TLS handshake with party {peer.name!r} at {peer.host}:{peer.port} failed: {exc.reason or exc} "
                f"({hint})") from exc
        except (FrameError, HandshakeError):
            close()
            raise
        except OSError as exc:
            close()
            raise HandshakeError(f"handshake with {where} failed: {exc} (is another program listening on "
                                 "that port?)") from exc


def _out_role(names: list[str], me: int, peer: str) -> str:
    """The direction of the link on which this party writes to ``peer``."""
    return WRITES if names.index(peer) < me else READS


def _send_abort(sock: socket.socket, reason: str) -> None:
    """Best effort: tell a linked peer why this party stops (it raises PeerError with it)."""
    payload = F.json_payload({"error": reason[:2000]}, 4096)
    try:
        sock.settimeout(2.0)
        sock.sendall(F.header(F.ABORT, b"", len(payload)) + payload)
    except (OSError, ValueError):
        pass


def _check_linked(links: dict[tuple[str, str], socket.socket], names: list[str], me: int,
                  finished_peers: set[str], both_links: Callable[[str], bool]) -> None:
    """Raise PeerError if a peer this party is already linked to has stopped.

    What may arrive during set-up: on the link this party writes to, nothing but an ABORT
    (a peer never writes there) or the end of the stream; on the other link, nothing at all
    until the peer has both of its links with this party (before that it cannot have started
    its job), so that link is watched only until then (``both_links`` says, at the moment of
    reading). A peer with both links that closes may simply have finished its job before this
    party is done connecting to others: it goes into ``finished_peers`` and whatever it sent is
    left for the channel."""
    watched: list[tuple[str, socket.socket, bool]] = []  # (peer, socket, is it this party's out-link)
    for peer in {name for name, _ in links} - finished_peers:
        out_role = _out_role(names, me, peer)
        in_role = READS if out_role == WRITES else WRITES
        if (peer, out_role) in links:
            watched.append((peer, links[(peer, out_role)], True))
        elif (peer, in_role) in links:
            watched.append((peer, links[(peer, in_role)], False))
    if not watched:
        return
    try:
        readable, _, _ = select.select([s for _, s, _ in watched], [], [], 0)
    except (OSError, ValueError):  # a socket closed under us
        readable = [s for _, s, _ in watched if s.fileno() < 0]
    for peer, sock, outgoing in watched:
        if sock not in readable and not (isinstance(sock, (ssl.SSLSocket, SealedSocket)) and sock.pending()):
            continue
        if not outgoing and both_links(peer):
            continue  # the peer may have started its job: its messages are the channel's
        reason = _abort_reason(sock, peer)
        if reason is not None:
            raise PeerError(f"party {peer!r} aborted: {reason}")
        if both_links(peer):
            finished_peers.add(peer)
            continue
        raise PeerError(f"party {peer!r} dropped its connection while the parties were connecting "
                        "(its process stopped or failed; see its own output)")


def _abort_reason(sock: socket.socket, peer: str, wait: float = 1.0) -> str | None:
    """The reason in the ABORT frame a peer sent on ``sock``, or None if it sent none (closed)."""
    try:
        sock.settimeout(wait)
        kind, tag_len, length = F.parse_header(_exact(sock, F.HEADER_SIZE), peer)
        if kind != F.ABORT or length > 4096:
            return None
        info = F.parse_json(_exact(sock, tag_len + length)[tag_len:], peer)
        return str(info.get("error", "unknown error") if isinstance(info, dict) else info)
    except (OSError, ValueError, FrameError):
        return None
