"""Ray as the scale-out executor: one party's batch kernel work on a Ray cluster it owns.

A party is one process; with the Ray executor its expensive kernel batches (encryptions,
CRT decryptions, sparse ciphertext products, packing, the bucket polynomials of FNP PSI: every
call that goes through :func:`shaper.kernels.get_kernel`) are cut into chunks exactly as the
local multi-core kernel cuts them (:class:`~shaper.kernels.parallel.ParallelKernel`) and the
chunks run on Ray actors instead of local worker processes. Everything else stays where it
was: the party's own process draws all randomness, does all the networking with its peers and
keeps the protocol state, so the peers see the same messages whichever executor a party uses,
and the results are bit-identical to the local executor's.

Selection: :func:`shaper.kernels.set_executor` (the last call wins; ``Session.from_config``
makes that call for a party whose parties-file entry has an ``[party.executor]`` table), else
the environment::

    SHAPER_EXECUTOR=local              # default: this machine's cores
    SHAPER_EXECUTOR=ray                # Ray: RAY_ADDRESS if set, else a private instance here
    SHAPER_EXECUTOR=ray:10.0.0.5:6379  # Ray at an address (also ray:auto, ray:ray://head:10001)
    SHAPER_RAY_ACTORS=32               # actors (default: the cluster's CPUs / cpus per actor)
    SHAPER_RAY_CPUS_PER_ACTOR=1        # cores each actor reserves and its kernel uses
    SHAPER_RAY_TASK_TIMEOUT=600        # seconds without any chunk finishing = cluster lost
    SHAPER_RAY_RETRIES=3               # re-runs of a chunk whose worker died
    SHAPER_RAY_MIN_WORK_MS=200         # batches with less estimated work stay on this machine
    SHAPER_RAY_INSECURE=1              # allow a non-local cluster without Ray's TLS (see below)

What each worker holds (the cluster is inside the party's trust boundary): the actors receive
the operands of the chunks they run — ciphertexts, plaintext residues, exponent bytes (which
for encryption are the secret randomness), the sparse matrix blocks, and for decryption the
private factors in the form the kernel needs (p - 1, q - 1 as exponents, p², q² as moduli).
Links: Ray's own connections are neither encrypted nor authenticated unless Ray's TLS is on, so
the executor refuses a cluster that is not local to this machine (an address other than
loopback, or any node of the joined cluster at another address) unless ``RAY_USE_TLS=1`` with
``RAY_TLS_SERVER_CERT``, ``RAY_TLS_SERVER_KEY`` and ``RAY_TLS_CA_CERT`` naming readable files
(Ray's mutual TLS; every node must run with the same settings), or the party explicitly allows
it (``insecure = true`` in ``[party.executor]``, ``SHAPER_RAY_INSECURE=1``): :func:`ray_transport`
and :func:`check_cluster_nodes` decide, before any actor is started. A private instance this
process starts, or a head on a loopback address whose nodes are all this machine, stays allowed.
Fixed-base tables are built on each actor from the public base and modulus the first time a
key is used and cached there (one per key and window setting), so a key's tables cross the
network never and its ~1 KiB spec once per chunk. Nothing reaches a worker from a peer, and
no worker talks to a peer.

Faults: a chunk whose actor dies (its process or its node) is re-run on another actor and the
dead actor is replaced, up to ``retries`` times per chunk. A cluster that is gone (no actor can
be reached or created, or nothing finishes for ``task_timeout`` seconds) makes the call raise
:class:`~shaper.errors.KernelError`, which fails the party with that message; long jobs then
resume from their checkpoint. Transport between the party and its actors is this package's
typed wire format (:mod:`shaper.kernels.wire`) carried as bytes, so an actor never unpickles
integers or arrays from the party's call arguments.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import ConfigError, KernelError
from . import wire
from .parallel import ParallelKernel

KINDS = ("local", "ray")

# A Ray task costs about 1-2 ms of scheduling and transfer, so each chunk carries at least
# RAY_MIN_CHUNK_US of work (overhead at most a few per cent) and each actor keeps PIPELINE
# chunks queued so the next one is there when it finishes. Batches below min_work_ms of
# estimated work stay on the party's machine.
RAY_MIN_CHUNK_US = 50_000.0
RAY_CHUNKS_PER_WORKER = 4
PIPELINE = 2
POLL_SECONDS = 1.0
# With no chunk finished for PROBE_AFTER seconds the head's GCS port is probed (a lost head
# leaves Ray's tasks pending, not failed); it must answer within PROBE_TIMEOUT, twice.
PROBE_AFTER = 5.0
PROBE_TIMEOUT = 2.0
# How long the actors may take to start (import shaper, build their kernel) before the executor
# gives up with an error.
STARTUP_SECONDS = 120.0

INSTALL_HINT = 'the Ray executor needs Ray: pip install "shaper-ppml[ray]"'


@dataclass(frozen=True)
class ExecutorSettings:
    """Where a party's kernel batches run. ``kind="local"``: this machine's cores (the default).
    ``kind="ray"``: a Ray cluster at ``address`` (``None``: ``RAY_ADDRESS`` if set, else a private
    Ray instance on this machine), with ``actors`` actors of ``cpus_per_actor`` cores each
    (``None``: as many as the cluster's CPUs allow)."""

    kind: str = "local"
    address: str | None = None
    actors: int | None = None
    cpus_per_actor: int = 1
    task_timeout: float = 600.0
    retries: int = 3
    min_work_ms: float = 200.0
    #: allow a non-local cluster without Ray's TLS (the party vouches for its network)
    insecure: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"executor must be one of {', '.join(KINDS)}; got {self.kind!r}")
        if self.address is not None and (not isinstance(self.address, str) or not self.address.strip()):
            raise ConfigError(f"executor address must be a non-empty string, got {self.address!r}")
        if self.actors is not None and (not isinstance(self.actors, int) or isinstance(self.actors, bool)
                                        or self.actors < 1):
            raise ConfigError(f"executor actors must be a positive integer, got {self.actors!r}")
        if not isinstance(self.cpus_per_actor, int) or isinstance(self.cpus_per_actor, bool) or self.cpus_per_actor < 1:
            raise ConfigError(f"executor cpus_per_actor must be a positive integer, got {self.cpus_per_actor!r}")
        if not (isinstance(self.task_timeout, (int, float)) and self.task_timeout > 0):
            raise ConfigError(f"executor task_timeout must be a positive number of seconds, got {self.task_timeout!r}")
        if not isinstance(self.retries, int) or isinstance(self.retries, bool) or self.retries < 0:
            raise ConfigError(f"executor retries must be a non-negative integer, got {self.retries!r}")
        if not (isinstance(self.min_work_ms, (int, float)) and not isinstance(self.min_work_ms, bool)
                and self.min_work_ms >= 0):
            raise ConfigError(f"executor min_work_ms must be a non-negative number, got {self.min_work_ms!r}")
        if not isinstance(self.insecure, bool):
            raise ConfigError(f"executor insecure must be true or false, got {self.insecure!r}")
        if self.kind == "local" and (self.address is not None or self.actors is not None or self.insecure):
            raise ConfigError("executor address/actors/insecure apply to kind = \"ray\" only")

    def describe(self) -> str:
        if self.kind == "local":
            return "local"
        where = self.address or os.environ.get("RAY_ADDRESS") or "a private Ray instance on this machine"
        return f"ray ({where})"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "ExecutorSettings":
        """From ``SHAPER_EXECUTOR`` and the ``SHAPER_RAY_*`` variables (see the module docstring)."""
        env = os.environ if environ is None else environ
        raw = env.get("SHAPER_EXECUTOR", "local").strip()
        kind, _, address = raw.partition(":")
        kind = kind.lower()
        if kind not in KINDS or (kind == "local" and address):
            raise ConfigError(f"SHAPER_EXECUTOR must be 'local', 'ray' or 'ray:<address>'; got {raw!r}")
        if kind == "local":
            return cls()
        fields: dict[str, Any] = {"kind": "ray", "address": address or None}
        for name, key, conv in (("actors", "SHAPER_RAY_ACTORS", int), ("cpus_per_actor", "SHAPER_RAY_CPUS_PER_ACTOR", int),
                                ("task_timeout", "SHAPER_RAY_TASK_TIMEOUT", float),
                                ("retries", "SHAPER_RAY_RETRIES", int),
                                ("min_work_ms", "SHAPER_RAY_MIN_WORK_MS", float)):
            if env.get(key, "").strip():
                try:
                    fields[name] = conv(env[key])
                except ValueError:
                    raise ConfigError(f"{key} must be a number, got {env[key]!r}") from None
        insecure = env.get("SHAPER_RAY_INSECURE", "").strip().lower()
        if insecure:
            if insecure not in ("0", "1", "true", "false"):
                raise ConfigError(f"SHAPER_RAY_INSECURE must be 1 or 0, got {env['SHAPER_RAY_INSECURE']!r}")
            fields["insecure"] = insecure in ("1", "true")
        return cls(**fields)

    @classmethod
    def from_mapping(cls, raw: Any, what: str = "[party.executor]") -> "ExecutorSettings":
        """From a parties file table: ``kind``, ``address``, ``actors``, ``cpus_per_actor``,
        ``task_timeout`` (seconds; the parties file reader also takes "10m"), ``retries``,
        ``min_work_ms``, ``insecure``."""
        if isinstance(raw, str):
            raw = {"kind": raw}
        if not isinstance(raw, dict):
            raise ConfigError(f"{what} must be a table or \"local\"/\"ray\", got {raw!r}")
        known = {"kind", "address", "actors", "cpus_per_actor", "task_timeout", "retries", "min_work_ms", "insecure"}
        unknown = set(raw) - known
        if unknown:
            raise ConfigError(f"{what}: unknown keys {', '.join(sorted(unknown))} (known: {', '.join(sorted(known))})")
        fields = dict(raw)
        try:
            return cls(**fields)
        except ConfigError as exc:
            raise ConfigError(f"{what}: {exc}") from None


# -- which links may carry a party's secrets ----------------------------------------------------

TLS_VARIABLES = ("RAY_TLS_SERVER_CERT", "RAY_TLS_SERVER_KEY", "RAY_TLS_CA_CERT")
_SHIPPED = ("the actors receive private key material (p - 1, q - 1, p², q² for decryption) and "
            "encryption randomness")


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true")


def tls_problem(environ: Mapping[str, str]) -> str | None:
    """None when Ray's TLS is on in ``environ`` (``RAY_USE_TLS`` and its three certificate
    variables naming readable files), else what is missing."""
    if not _truthy(environ.get("RAY_USE_TLS")):
        return "RAY_USE_TLS is not set to 1"
    missing = [v for v in TLS_VARIABLES if not environ.get(v, "").strip()]
    if missing:
        return f"RAY_USE_TLS=1 but {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set"
    for v in TLS_VARIABLES:
        if not os.access(environ[v], os.R_OK):
            return f"{v}={environ[v]!r} is not a readable file"
    return None


def _host_of(address: str) -> str | None:
    """The host of a Ray address (``host:port``, ``[v6]:port``, ``ray://host:port``), or None
    for ``auto`` / ``local`` (no host named)."""
    a = address.strip()
    if "://" in a:
        a = a.split("://", 1)[1]
    a = a.split("/", 1)[0]
    if a.lower() in ("auto", "local", ""):
        return None
    if a.startswith("["):
        return a[1:a.index("]")] if "]" in a else a[1:]
    if a.count(":") > 1:  # a bare IPv6 address
        try:
            return str(ipaddress.ip_address(a))
        except ValueError:
            return a.rsplit(":", 1)[0]
    return a.rsplit(":", 1)[0] if ":" in a else a


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1); names are not resolved."""
    h = host.strip().strip("[]").lower()
    if h == "localhost" or h.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def ray_transport(address: str | None, environ: Mapping[str, str] | None = None, *, insecure: bool = False) -> str:
    """Whether this party may send its chunks to the Ray cluster at ``address`` (None:
    ``RAY_ADDRESS``, else a private instance this process starts), decided before joining:
    ``"local"`` (a private instance, a loopback head, or ``local``), ``"tls"`` (Ray's TLS is on),
    ``"unknown"`` (``auto``: decided by :func:`check_cluster_nodes` once joined) or
    ``"insecure"`` (allowed by ``insecure``). Raises :class:`~shaper.errors.ConfigError` for a
    non-local cluster without TLS and without the override, saying why."""
    env = os.environ if environ is None else environ
    where = address if address is not None else env.get("RAY_ADDRESS") or None
    if where is None:
        return "local"  # ray.init() starts a private instance in this process
    host = _host_of(where)
    if host is None:
        if where.strip().lower() == "local":
            return "local"
        return "tls" if tls_problem(env) is None else "unknown"
    if is_loopback(host) or host.strip("[]").lower() in machine_addresses():
        # this machine's own head: the nodes that joined it are checked once joined
        return "local" if tls_problem(env) is not None else "tls"
    problem = tls_problem(env)
    if problem is None:
        return "tls"
    if insecure:
        return "insecure"
    raise ConfigError(_refusal(f"the Ray cluster at {where}", problem))


def check_cluster_nodes(node_addresses: Iterable[str], local_addresses: Iterable[str], mode: str,
                        environ: Mapping[str, str] | None = None, *, insecure: bool = False,
                        where: str = "the Ray cluster") -> None:
    """After joining, before any actor starts: a cluster whose nodes are not all at
    ``local_addresses`` (this machine's, loopback included) is refused unless ``mode`` is
    ``"tls"`` or ``"insecure"``, or Ray's TLS is on, or ``insecure`` (see :func:`ray_transport`)."""
    if mode in ("tls", "insecure"):
        return
    env = os.environ if environ is None else environ
    local = {a.strip().lower() for a in local_addresses}
    remote = sorted({a for a in node_addresses if a.strip().lower() not in local and not is_loopback(a)})
    if not remote:
        return
    problem = tls_problem(env)
    if problem is None or insecure:
        return
    shown = ", ".join(remote[:5]) + (f" and {len(remote) - 5} more" if len(remote) > 5 else "")
    raise ConfigError(_refusal(f"{where}, which has nodes on other machines ({shown}),", problem))


def _refusal(what: str, problem: str) -> str:
    return (f"refusing to run kernel batches on {what}: {_SHIPPED}, and Ray's links are neither encrypted nor "
            f"authenticated without its TLS ({problem}). Turn on Ray's TLS on every node and here (RAY_USE_TLS=1, "
            "RAY_TLS_SERVER_CERT, RAY_TLS_SERVER_KEY, RAY_TLS_CA_CERT), or, only if the network between this "
            "machine and the cluster is the party's own and closed to everyone else, set insecure = true in "
            "[party.executor] (SHAPER_RAY_INSECURE=1; shaper cluster check --insecure); see docs/scale-out.md")


def machine_addresses() -> set[str]:
    """This machine's own addresses, without Ray: loopback, what its host name resolves to, and
    the source address of its outbound routes (the address a local Ray head advertises; found
    by connecting a UDP socket, which sends nothing)."""
    out = {"127.0.0.1", "::1", "localhost"}
    try:
        _, _, ips = socket.gethostbyname_ex(socket.gethostname())
        out.update(ips)
    except OSError:
        pass
    for family, probe in ((socket.AF_INET, "198.51.100.1"), (socket.AF_INET6, "2001:db8::1")):
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as udp:
                udp.connect((probe, 9))
                out.add(udp.getsockname()[0].lower())
        except OSError:
            pass
    return out


def _local_addresses(ray: Any) -> set[str]:
    """This machine's addresses as Ray and the resolver see them."""
    out = machine_addresses()
    try:
        out.add(ray.util.get_node_ip_address())
    except Exception:
        pass
    try:
        _, _, ips = socket.gethostbyname_ex(socket.gethostname())
        out.update(ips)
    except OSError:
        pass
    return out


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    return ray


class KernelActor:
    """A Ray actor that runs encoded kernel calls on its node's own kernel (native where the
    node has it, else gmpy2), with ``cpus`` cores. Its fixed-base tables stay cached between
    calls. Never used as a local executor: its kernel is always the local one."""

    def __init__(self, native_mode: str, cpus: int) -> None:
        os.environ["SHAPER_EXECUTOR"] = "local"
        os.environ["SHAPER_NATIVE"] = native_mode
        os.environ["SHAPER_WORKERS"] = str(cpus)
        from . import get_kernel, set_workers

        set_workers(cpus)
        self.kernel = get_kernel()

    def run(self, frame: bytes) -> bytes:
        return wire.serve(self.kernel, frame)

    def info(self) -> dict:
        return {"pid": os.getpid(), "host": socket.gethostname(), "kernel": self.kernel.name}


def _lost_actor_errors(ray: Any) -> tuple[type[BaseException], ...]:
    ex = ray.exceptions
    names = ("RayActorError", "ActorDiedError", "ActorUnavailableError", "WorkerCrashedError", "NodeDiedError",
             "ObjectLostError", "OwnerDiedError", "LocalRayletDiedError")
    return tuple(getattr(ex, n) for n in names if hasattr(ex, n))


class RayPool:
    """Runs encoded kernel chunks on Ray actors: the ``map(workers, tasks)`` contract of the
    local process pool (results in task order, each task run once), with chunks handed out
    dynamically, ``PIPELINE`` queued per actor, and a dead actor's chunks re-run elsewhere."""

    def __init__(self, settings: ExecutorSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._actors: list[Any] = []
        self._remote: Any = None
        self._native_mode = "auto"
        self._started_ray = False
        self.stats = {"chunks": 0, "retried": 0, "replaced": 0}

    # -- cluster -------------------------------------------------------------------------------
    def connect(self) -> int:
        """Join the cluster and start the actors (once); the actor count."""
        with self._lock:
            return self._connect()

    def _connect(self) -> int:
        if self._actors:
            return len(self._actors)
        ray = _ray()
        from . import native

        self._native_mode = native.mode()
        # refused before joining when the address alone shows a remote cluster without TLS
        mode = ray_transport(self.settings.address, insecure=self.settings.insecure)
        try:
            if not ray.is_initialized():
                address = self.settings.address
                ray.init(address=address, include_dashboard=False, log_to_driver=False,
                         logging_level="ERROR", configure_logging=True)
                self._started_ray = address is None and not os.environ.get("RAY_ADDRESS")
            cpus = int(ray.cluster_resources().get("CPU", 0))
            nodes = [n.get("NodeManagerAddress", "") for n in ray.nodes() if n.get("Alive", True)]
        except Exception as exc:
            raise KernelError(f"cannot join the Ray cluster at {self.settings.describe()}: {exc}") from exc
        if not self._started_ray:  # a private instance is this machine's; any other may have grown
            try:
                check_cluster_nodes(nodes, _local_addresses(ray), mode, insecure=self.settings.insecure,
                                    where=f"the Ray cluster at {self.settings.describe()}")
            except ConfigError:
                ray.shutdown()  # nothing was sent: leave the cluster before saying why
                raise
        per = self.settings.cpus_per_actor
        count = self.settings.actors or max(1, cpus // per)
        if cpus < per:
            raise KernelError(f"the Ray cluster has {cpus} CPUs; an actor needs {per} (SHAPER_RAY_CPUS_PER_ACTOR)")
        self._remote = ray.remote(KernelActor).options(num_cpus=per, max_restarts=0, max_concurrency=1,
                                                       scheduling_strategy="SPREAD")
        free = int(ray.available_resources().get("CPU", 0))
        self._actors = [self._new_actor() for _ in range(count)]
        try:  # fail here, clearly, if the workers cannot import shaper or start their kernel
            ray.get([a.info.remote() for a in self._actors], timeout=min(STARTUP_SECONDS, self.settings.task_timeout))
        except Exception as exc:
            for a in self._actors:
                ray.kill(a, no_restart=True)
            self._actors = []
            why = (f"{count} actors of {per} CPUs need {count * per} free CPUs and the cluster had {free} "
                   "(other jobs' actors hold the rest: lower SHAPER_RAY_ACTORS)" if free < count * per else
                   "is shaper-ppml installed on every node?")
            raise KernelError(f"the Ray workers at {self.settings.describe()} could not start shaper's kernel "
                              f"({why}): {type(exc).__name__}: {exc}") from exc
        return count

    def _new_actor(self) -> Any:
        return self._remote.remote(self._native_mode, self.settings.cpus_per_actor)

    @property
    def actors(self) -> int:
        return self.connect()

    def describe_actors(self) -> list[dict]:
        """``info()`` of every actor: pid, host, kernel."""
        ray = _ray()
        self.connect()
        return ray.get([a.info.remote() for a in self._actors], timeout=self.settings.task_timeout)

    def close(self) -> None:
        """Release the actors (and shut down a Ray instance this pool started)."""
        with self._lock:
            if not self._actors:
                return
            ray = _ray()
            for a in self._actors:
                try:
                    ray.kill(a, no_restart=True)
                except Exception:
                    pass
            self._actors = []
            if self._started_ray and ray.is_initialized():
                ray.shutdown()
            self._started_ray = False

    # -- running chunks --------------------------------------------------------------------------
    def map(self, workers: int, tasks: list[tuple[str, tuple]]) -> list:
        payloads = [wire.encode((method, tuple(args))) for method, args in tasks]
        with self._lock:
            self._connect()
            try:
                replies = self._run(payloads, tasks[0][0] if tasks else "")
            except KernelError:
                raise
            except KeyboardInterrupt:
                raise
            except Exception as exc:
                raise KernelError(f"the Ray cluster at {self.settings.describe()} failed while running "
                                  f"{tasks[0][0]!r}: {type(exc).__name__}: {exc}") from exc
        return [wire.unwrap(wire.decode(r), KernelError) for r in replies]

    def _run(self, payloads: list[bytes], method: str) -> list[bytes]:
        ray = _ray()
        lost = _lost_actor_errors(ray)
        settings = self.settings
        replies: list[bytes | None] = [None] * len(payloads)
        attempts = [0] * len(payloads)
        queue = deque(range(len(payloads)))
        stored: dict[int, Any] = {}  # chunk -> its payload in the object store (kept for retries)
        running: dict[Any, tuple[int, int]] = {}  # ref -> (chunk, actor slot)
        load = [0] * len(self._actors)
        last_progress = last_probe = time.monotonic()
        try:
            while queue or running:
                # keep every live actor PIPELINE deep, the least loaded first
                for slot in sorted(range(len(self._actors)), key=load.__getitem__):
                    while queue and load[slot] < PIPELINE:
                        index = queue.popleft()
                        if index not in stored:
                            stored[index] = ray.put(payloads[index])
                        ref = self._actors[slot].run.remote(stored[index])
                        running[ref] = (index, slot)
                        load[slot] += 1
                done, _ = ray.wait(list(running), num_returns=1, timeout=POLL_SECONDS)
                if not done:
                    idle = time.monotonic() - last_progress
                    if idle > PROBE_AFTER and time.monotonic() - last_probe > PROBE_AFTER:
                        last_probe = time.monotonic()
                        self._probe_head(ray)
                    if idle > settings.task_timeout:
                        raise KernelError(
                            f"the Ray cluster at {settings.describe()} finished no chunk of {method!r} for "
                            f"{settings.task_timeout:.0f} s (cluster lost or overloaded; SHAPER_RAY_TASK_TIMEOUT)")
                    continue
                for ref in done:
                    index, slot = running.pop(ref)
                    load[slot] -= 1
                    try:
                        replies[index] = ray.get(ref)
                    except lost as exc:
                        self._replace(slot, running, load, queue, attempts, index, exc, method)
                        continue
                    del stored[index]
                    self.stats["chunks"] += 1
                    last_progress = time.monotonic()
        finally:
            for ref in running:
                try:
                    ray.cancel(ref, force=False)
                except Exception:
                    pass
        return replies  # type: ignore[return-value]

    def _probe_head(self, ray: Any) -> None:
        """Raise at once if the cluster's head (its GCS) no longer accepts connections: Ray
        itself would leave the tasks pending until ``task_timeout``."""
        try:
            host, _, port = ray.get_runtime_context().gcs_address.rpartition(":")
            address = (host.strip("[]"), int(port))
        except Exception:  # no address to probe: rely on the timeout
            return
        for attempt in range(2):
            try:
                socket.create_connection(address, timeout=PROBE_TIMEOUT).close()
                return
            except OSError as exc:
                if attempt:
                    raise KernelError(f"the Ray cluster at {self.settings.describe()} is gone: its head "
                                      f"{address[0]}:{address[1]} refuses connections ({exc})") from exc
                time.sleep(PROBE_TIMEOUT)

    def _replace(self, slot: int, running: dict, load: list[int], queue: deque, attempts: list[int], index: int,
                 exc: BaseException, method: str) -> None:
        """The actor in ``slot`` died: requeue its chunks (the failed one first) and start a
        replacement there."""
        retry = [index] + [i for i, s in running.values() if s == slot]
        for ref in [r for r, (_, s) in running.items() if s == slot]:
            del running[ref]
        load[slot] = 0
        for i in retry:
            attempts[i] += 1
            if attempts[i] > self.settings.retries:
                raise KernelError(
                    f"a chunk of {method!r} failed on {attempts[i]} Ray workers (the last: {type(exc).__name__}: "
                    f"{str(exc).splitlines()[0] if str(exc) else ''}); giving up (SHAPER_RAY_RETRIES)") from exc
        queue.extendleft(reversed(retry))
        self.stats["retried"] += len(retry)
        try:
            self._actors[slot] = self._new_actor()
            self.stats["replaced"] += 1
        except Exception as err:
            raise KernelError(f"a Ray worker died and no replacement could be started at "
                              f"{self.settings.describe()}: {err}") from err


class RayKernel(ParallelKernel):
    """The kernel interface with its big batches on Ray actors (see the module docstring).
    Batches below ``settings.min_work_ms`` of estimated work, and element-wise products, run on
    ``local`` (the kernel this process would use on its own)."""

    chunks_per_worker = RAY_CHUNKS_PER_WORKER
    min_chunk_us = RAY_MIN_CHUNK_US

    def __init__(self, settings: ExecutorSettings, local: Any) -> None:
        if settings.kind != "ray":
            raise ValueError("RayKernel needs executor settings of kind 'ray'")
        self.pool_ray = RayPool(settings)
        actors = self.pool_ray.connect()
        super().__init__(actors, settings.min_work_ms * 1000.0, pool=self.pool_ray, local=local)
        self.name = f"ray({actors} actors) over {getattr(local, 'name', 'local')}"
        self.settings = settings

    def _parallel(self, estimated_us: float, count: int) -> bool:
        return count >= 2 and estimated_us >= self.min_us  # even one actor is another machine's cores

    def close(self) -> None:
        self.pool_ray.close()

