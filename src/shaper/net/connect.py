"""Setting up the links between parties: listen, dial with retries, TLS, handshake.

Party i listens; every party with a higher index dials it, twice: one link for each direction.
A dialer retries refused connections until ``connect_timeout`` (the peer may simply not be up
yet). After TLS, the dialer sends a HELLO (protocol name and version, session id, its name, the
name it expects, the link's direction) and the listener answers; both sides check the version,
the session id, and that the certificate's common name is the party named. Anything else is a
:class:`~shaper.errors.HandshakeError` that says which peer and why.

A party that fails while links are being set up tells the peers it is already linked to: it
sends ABORT with its error on those links, then closes them. While a party waits for further
links it watches the ones it already has (a peer only ever *reads* from the link this party
writes to, so anything arriving there means the peer has gone), and stops at once with
:class:`~shaper.errors.PeerError` naming that peer and, when it sent one, its reason. A listener
likewise stops at once when an authenticated expected party presents a mismatched session id,
version or party order (that party stops too, so waiting longer cannot help); unauthenticated
connections only add to the report given at ``connect_timeout``.
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

from ..errors import FrameError, HandshakeError, PeerError
from . import frames as F
from .config import NetConfig, Party
from .sealed import SealedSocket, seal
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
    fatal: list[Exception] = []  # problems that end the set-up at once
    finished_peers: set[str] = set()  # linked peers that may already have finished their job
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
                if finished[0] or expected_in <= set(links) or time.monotonic() > deadline:
                    return
            try:
                listener.settimeout(max(0.05, min(0.5, deadline - time.monotonic())))
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
            identity = peer_identity(sock) if server_ctx is not None else None
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
            elif server_ctx is not None and identity != claimed:
                problem = f"certificate identifies {identity!r}, but the peer claims to be {claimed!r}"
            key = (claimed, hello.get("role"))
            # A party of this job, proven by its certificate, that is configured differently: it
            # stops on our refusal, so there is nothing left to wait for.
            hopeless = problem is not None and identity == claimed and claimed in names and claimed != my.name
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
                        fatal.append(HandshakeError(f"party {claimed!r} cannot join the job: {problem}"))
                        lock.notify_all()
                raise HandshakeError(f"{who}: {problem}")
            if server_ctx is not None:  # this end writes on the link when the dialer reads on it
                sock = seal(sock, writer=hello.get("role") == READS, peer=claimed)
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
                sock = _dial(my, peer, role, config, client_ctx, deadline, check_linked)
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


def _dial(me: Party, peer: Party, role: str, config: NetConfig, ctx: ssl.SSLContext | None,
          deadline: float, check: Callable[[], None] = lambda: None) -> socket.socket:
    delay = 0.05
    last: Exception | None = None
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
            return seal(sock, writer=role == WRITES, peer=peer.name) if ctx is not None else sock
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
