"""Setting up the links between parties: listen, dial with retries, TLS, handshake.

Party i listens; every party with a higher index dials it, twice: one link for each direction.
A dialer retries refused connections until ``connect_timeout`` (the peer may simply not be up
yet). After TLS, the dialer sends a HELLO (protocol name and version, session id, its name, the
name it expects, the link's direction) and the listener answers; both sides check the version,
the session id, and that the certificate's common name is the party named. Anything else is a
:class:`~shaper.errors.HandshakeError` that says which peer and why.
"""

from __future__ import annotations

import errno
import json
import socket
import ssl
import threading
import time

from ..errors import FrameError, HandshakeError
from . import frames as F
from .config import NetConfig, Party
from .tls import TLSFiles, client_context, peer_identity, server_context

PROTOCOL = "shaper-net"
WRITES = "dialer-writes"  # on this link the dialer writes and the listener reads
READS = "listener-writes"


def _tune(sock: socket.socket) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        try:
            sock.setsockopt(socket.SOL_SOCKET, opt, 4 << 20)
        except OSError:
            pass


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
        raise HandshakeError(f"party {party.name!r} cannot listen on {host or '*'}:{party.port}: {exc}") from exc
    sock.listen(64)
    return sock


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


def connect(me: int, parties: list[Party], config: NetConfig, tls: TLSFiles | None,
            listener: socket.socket | None = None) -> dict[str, tuple[socket.socket, socket.socket]]:
    """Links to every peer: ``{peer: (socket this party writes to, socket it reads from)}``."""
    if (tls is None) != config.insecure:
        raise HandshakeError("TLS files are required unless the configuration is explicitly insecure")
    names = [p.name for p in parties]
    my = parties[me]
    deadline = time.monotonic() + config.connect_timeout
    links: dict[tuple[str, str], socket.socket] = {}
    errors: list[str] = []
    lock = threading.Condition()
    finished = [False]  # set when connect() returns or gives up: late arrivals are refused
    reserved: set[tuple[str, str]] = set()  # accepted links whose reply is being sent
    expected_in = {(p.name, role) for p in parties[me + 1:] for role in (WRITES, READS)}
    own_listener = listener is None and bool(expected_in)
    if own_listener:
        listener = listen(my)
    server_ctx = server_context(tls) if tls is not None and expected_in else None
    client_ctx = client_context(tls) if tls is not None and me > 0 else None

    def accept_loop() -> None:
        assert listener is not None
        while True:
            with lock:
                if expected_in <= set(links) or time.monotonic() > deadline:
                    return
            listener.settimeout(max(0.05, min(0.5, deadline - time.monotonic())))
            try:
                raw, addr = listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=handle_incoming, args=(raw, addr), daemon=True).start()

    def handle_incoming(raw: socket.socket, addr: tuple) -> None:
        who = f"connection from {addr[0]}:{addr[1]}"
        sock = None
        try:
            _tune(raw)
            raw.settimeout(max(0.1, deadline - time.monotonic()))
            sock = server_ctx.wrap_socket(raw, server_side=True) if server_ctx else raw
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
            elif server_ctx is not None and peer_identity(sock) != claimed:
                problem = f"certificate identifies {peer_identity(sock)!r}, but the peer claims to be {claimed!r}"
            key = (claimed, hello.get("role"))
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
                raise HandshakeError(f"{who}: {problem}")
            with lock:
                if finished[0]:
                    raise HandshakeError(f"{who}: arrived after the listener stopped waiting")
                links[key] = sock
                lock.notify_all()
        except (OSError, ssl.SSLError, FrameError, HandshakeError) as exc:
            with lock:
                errors.append(f"{who}: {exc}")
                lock.notify_all()
            for s_ in {id(raw): raw, id(sock): sock}.values() if sock is not None else (raw,):
                try:
                    s_.close()
                except OSError:
                    pass

    acceptor = threading.Thread(target=accept_loop, name="shaper-accept", daemon=True) if expected_in else None
    if acceptor:
        acceptor.start()
    try:
        for peer in parties[:me]:
            for role in (WRITES, READS):
                links[(peer.name, role)] = _dial(my, peer, role, config, client_ctx, deadline)
        if acceptor:
            with lock:
                while not expected_in <= set(links) and time.monotonic() < deadline:
                    lock.wait(min(0.2, max(0.0, deadline - time.monotonic())))
                missing = sorted({name for name, role in expected_in - set(links)})
            if missing:
                detail = "; ".join(errors[-5:]) if errors else "no connection attempt arrived"
                raise HandshakeError(
                    f"party {my.name!r} waited {config.connect_timeout:.0f}s for {', '.join(map(repr, missing))} "
                    f"to connect to port {listener.getsockname()[1] if listener else '?'}: {detail}"
                )
    except BaseException:
        with lock:
            finished[0] = True
            leftovers = list(links.values())
        for sock in leftovers:
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


def _dial(me: Party, peer: Party, role: str, config: NetConfig, ctx: ssl.SSLContext | None,
          deadline: float) -> socket.socket:
    delay = 0.05
    last: Exception | None = None
    while True:
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
        try:
            _tune(raw)
            raw.settimeout(max(0.1, deadline - time.monotonic()))
            sock = ctx.wrap_socket(raw) if ctx is not None else raw
            if ctx is not None:
                identity = peer_identity(sock)  # type: ignore[arg-type]
                if identity != peer.name:
                    raise HandshakeError(
                        f"party {peer.name!r} at {peer.host}:{peer.port} presented a certificate for {identity!r}")
            _send_json(sock, {"proto": PROTOCOL, "version": F.VERSION, "session": config.session_id,
                              "from": me.name, "to": peer.name, "role": role})
            reply = _recv_json(sock, f"party {peer.name!r}")
            if not reply.get("ok"):
                raise HandshakeError(f"party {peer.name!r} refused the connection: {reply.get('error')}")
            return sock
        except ssl.SSLError as exc:
            raw.close()
            raise HandshakeError(
                f"TLS handshake with party {peer.name!r} at {peer.host}:{peer.port} failed: {exc.reason or exc} "
                "(certificates from different CAs, or a wrong certificate?)") from exc
        except (FrameError, HandshakeError):
            raw.close()
            raise
        except OSError as exc:
            raw.close()
            raise HandshakeError(f"handshake with party {peer.name!r} failed: {exc}") from exc
