"""Running all parties of a job on one machine: as processes over loopback TLS (``launch``), or
as threads over in-memory socket pairs (``run_in_memory``, for tests).

Both call ``fn(session, *args, **kwargs)`` in every party and return the results in party
order. If a party fails, its peers are told at once (ABORT: the kind of error and the phase,
not its text), and the call raises :class:`~shaper.errors.PartyError` for the *root cause*: the
first failure that was not merely a consequence of another party's failure, with that party's
message and traceback (which reach the launcher over its local pipe, never the peers).

``launch`` uses the ``fork`` start method when the calling process has a single thread (so ``fn``
may be any callable, even a closure); otherwise ``spawn``, in which case ``fn`` must be importable
(defined at module level) and a script must guard its entry point with
``if __name__ == "__main__":``. The launcher exchanges results with its children through local
pipes; party-to-party traffic never uses pickle.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import secrets
import socket
import tempfile
import threading
import time
import traceback
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any, Callable, Sequence

from ..errors import ConfigError, NetError, PartyError, PeerError, PeerTimeout
from .channel import Channel
from .config import NetConfig, Party, check_party_name
from .connect import listen
from .session import Session
from .stats import Stats
from .tls import TLSFiles, make_certificates


def _names(parties: int | Sequence[str]) -> list[str]:
    if isinstance(parties, int):
        if parties < 2:
            raise ConfigError(f"a job needs at least 2 parties, got {parties}")
        return [f"party{i}" for i in range(parties)]
    names = [check_party_name(p) for p in parties]
    if len(names) < 2 or len(set(names)) != len(names):
        raise ConfigError(f"need at least 2 distinct party names, got {names}")
    return names


def _is_secondary(error_type: str) -> bool:
    """Errors that are usually the echo of another party's failure."""
    return error_type in {PeerError.__name__, PeerTimeout.__name__, NetError.__name__}


def _root_cause(failures: list[tuple[float, str, str, str, str]]) -> PartyError:
    """failures: (time, party, error type, message, traceback), in arrival order."""
    primary = [f for f in failures if not _is_secondary(f[2])]
    _, party, etype, message, tb = (primary or failures)[0]
    return PartyError(party, f"{etype}: {message}", tb)


# -- in-memory (threads) ------------------------------------------------------------------------
def run_in_memory(parties: int | Sequence[str], fn: Callable[..., Any], *args: Any,
                  config: NetConfig | None = None, timeout: float | None = None, **kwargs: Any) -> list:
    """Run ``fn(session, *args, **kwargs)`` for every party as threads over in-memory socket
    pairs (the same channel code as TLS, minus TLS). Returns the results in party order."""
    names = _names(parties)
    config = config or NetConfig()
    stats = {n: Stats() for n in names}
    ends: dict[tuple[str, str], tuple[socket.socket, socket.socket]] = {}
    for a in names:
        for b in names:
            if a != b:
                ends[(a, b)] = socket.socketpair()  # a writes [0], b reads [1]
    sessions = []
    for a in names:
        channels = {b: Channel(a, b, ends[(a, b)][0], ends[(b, a)][1], config, stats[a]) for b in names if b != a}
        sessions.append(Session(a, names, channels, config, stats[a]))

    results: list[Any] = [None] * len(names)
    failures: list[tuple[float, str, str, str, str]] = []
    lock = threading.Lock()

    def body(i: int) -> None:
        session = sessions[i]
        try:
            results[i] = fn(session, *args, **kwargs)
        except BaseException as exc:
            with lock:
                failures.append((time.monotonic(), session.name, type(exc).__name__, str(exc), traceback.format_exc()))
            session.abort(exc)
        else:
            session.close()

    threads = [threading.Thread(target=body, args=(i,), name=f"party-{n}", daemon=True) for i, n in enumerate(names)]
    for t in threads:
        t.start()
    deadline = None if timeout is None else time.monotonic() + timeout
    for t in threads:
        t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
    stuck = [names[i] for i, t in enumerate(threads) if t.is_alive()]
    if stuck:
        for s in sessions:
            s.abort(TimeoutError(f"the job did not finish within {timeout}s"))
        raise PartyError(stuck[0], f"did not finish within {timeout}s")
    if failures:
        raise _root_cause(failures)
    return results


# -- processes over loopback TLS ----------------------------------------------------------------
def _party_main(index: int, names: list[str], cert_dir: str | None, config: NetConfig, conn: Any,
                fn: Callable[..., Any], args: tuple, kwargs: dict, workers: int | None, executor: Any) -> None:
    name = names[index]
    try:
        if workers or executor is not None:
            from .. import kernels

            if workers:
                kernels.set_workers(workers)
            if executor is not None:
                kernels.set_executor(executor)
                kernels.get_kernel()
        listener = listen(Party(name, "127.0.0.1", 0))
        conn.send(("port", listener.getsockname()[1]))
        kind, ports = conn.recv()
        parties = []
        for n, port in zip(names, ports):
            cert = Path(cert_dir) / f"{n}.pem" if cert_dir else None
            key = Path(cert_dir) / f"{n}.key" if cert_dir and n == name else None
            parties.append(Party(n, "127.0.0.1", port, cert, key))
        tls = None if cert_dir is None else TLSFiles(Path(cert_dir) / "ca.pem", Path(cert_dir) / f"{name}.pem",
                                                      Path(cert_dir) / f"{name}.key")
        session = Session.connect(name, parties, config, tls=tls, listener=listener)
        listener.close()
    except BaseException as exc:
        conn.send(("error", type(exc).__name__, str(exc), traceback.format_exc()))
        return
    try:
        result = fn(session, *args, **kwargs)
    except BaseException as exc:
        tb = traceback.format_exc()
        session.abort(exc)  # the peers learn the kind; the text goes to the launcher only
        conn.send(("error", type(exc).__name__, str(exc), tb))
        return
    session.close()
    try:
        conn.send(("ok", result))
    except Exception as exc:  # the result could not be sent back (not picklable)
        conn.send(("error", type(exc).__name__, f"cannot return the result to the launcher: {exc}", ""))


def launch(parties: int | Sequence[str], fn: Callable[..., Any], *args: Any, config: NetConfig | None = None,
           timeout: float | None = None, workers_per_party: int | None = None, start_method: str | None = None,
           executors: dict[str, Any] | None = None, **kwargs: Any) -> list:
    """Run ``fn(session, *args, **kwargs)`` in one local process per party, connected over
    loopback TLS with certificates made for this run (plain TCP if ``config.insecure``).

    ``workers_per_party`` sets each party's kernel worker count (default: the cores divided among
    the parties); ``executors`` maps a party name to where its big batches run (an
    :class:`~shaper.kernels.ExecutorSettings`, e.g. the host on Ray and the guest local; default:
    ``SHAPER_EXECUTOR``). Returns the results in party order; raises :class:`PartyError` for the root
    cause if any party fails or dies, or if the job exceeds ``timeout`` seconds.
    """
    names = _names(parties)
    executors = dict(executors or {})
    if set(executors) - set(names):
        raise ValueError(f"executors names parties {sorted(set(executors) - set(names))} that are not in {names}")
    config = config or NetConfig(session_id=f"launch-{secrets.token_hex(8)}")
    if workers_per_party is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover
            cores = os.cpu_count() or 1
        workers_per_party = max(1, cores // len(names))
    if start_method is None:
        start_method = "fork" if "fork" in mp.get_all_start_methods() and threading.active_count() == 1 else "spawn"
    ctx = mp.get_context(start_method)
    if start_method != "fork":
        try:
            pickle.dumps((fn, args, kwargs))
        except Exception as exc:
            raise TypeError(
                f"launch() starts parties with {start_method!r} here (this process runs threads), so the party "
                f"function and its arguments must be picklable: define the function at module level ({exc})"
            ) from exc
    with tempfile.TemporaryDirectory(prefix="shaper-launch-") as tmp:
        cert_dir = None
        if not config.insecure:
            make_certificates(names, tmp)
            cert_dir = tmp
        pipes = [ctx.Pipe() for _ in names]
        procs = [ctx.Process(target=_party_main, name=f"shaper-{n}",
                             args=(i, names, cert_dir, config, pipes[i][1], fn, args, kwargs, workers_per_party,
                                   executors.get(n)))
                 for i, n in enumerate(names)]
        for p in procs:
            p.start()
        for _, child in pipes:
            child.close()
        try:
            return _supervise(names, procs, [parent for parent, _ in pipes], config, timeout)
        finally:
            for p in procs:
                if p.is_alive():
                    p.terminate()
            for p in procs:
                p.join(5)
                if p.is_alive():
                    p.kill()
                    p.join()


def _supervise(names: list[str], procs: list, conns: list, config: NetConfig, timeout: float | None) -> list:
    deadline = None if timeout is None else time.monotonic() + timeout
    ports: list[int | None] = [None] * len(names)
    results: list[Any] = [None] * len(names)
    done = [False] * len(names)
    eof = [False] * len(names)
    failures: list[tuple[float, str, str, str, str]] = []
    ports_sent = False
    first_failure_at: float | None = None
    grace = min(config.timeout, 10.0)

    while not all(done):
        now = time.monotonic()
        if deadline is not None and now > deadline:
            pending = [names[i] for i in range(len(names)) if not done[i]]
            failures.append((now, pending[0], "TimeoutError", f"the job did not finish within {timeout}s", ""))
            break
        if first_failure_at is not None and now - first_failure_at > grace:
            break  # the root cause is known; do not wait for stragglers
        live = [c for i, c in enumerate(conns) if not done[i] and not eof[i]]
        live += [procs[i].sentinel for i in range(len(names)) if not done[i]]
        ready = wait(live, timeout=0.2)
        for i in range(len(names)):
            if done[i]:
                continue
            conn = conns[i]
            if not eof[i] and (conn in ready or conn.poll()):
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    msg = None
                    eof[i] = True  # the child closed its end: only the sentinel can tell us more
                if msg is None:
                    pass
                elif msg[0] == "port":
                    ports[i] = msg[1]
                    continue
                elif msg[0] == "ok":
                    results[i] = msg[1]
                    done[i] = True
                    continue
                elif msg[0] == "error":
                    failures.append((time.monotonic(), names[i], msg[1], msg[2], msg[3]))
                    done[i] = True
                    first_failure_at = first_failure_at or time.monotonic()
                    continue
            if procs[i].sentinel in ready and not procs[i].is_alive() and (eof[i] or not conn.poll()):
                code = procs[i].exitcode
                how = f"killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
                failures.append((time.monotonic(), names[i], "PartyDied", f"the process {how} without reporting", ""))
                done[i] = True
                first_failure_at = first_failure_at or time.monotonic()
        if not ports_sent and all(p is not None for p in ports):
            for i, c in enumerate(conns):
                if not done[i]:
                    c.send(("ports", ports))
            ports_sent = True
        if not ports_sent and failures:
            break  # a party died before the job could even start
    if failures:
        raise _root_cause(failures)
    return results
