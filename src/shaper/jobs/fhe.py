"""The jobs of ``shaper fhe`` (and ``benchmarks/threshold_ckks.py``): threshold CKKS key
generation, joint encryption, agreed evaluation, joint decryption, and the demo.

Each ``*_job`` is one party's side, run in its own session (on real hosts, or as one of the
processes of ``shaper.net.launch`` for ``--local N``); the ``*_local`` helpers run every party
here. The protocol steps are :mod:`shaper.protocols.threshold_ckks`.

A ciphertext is decrypted only when every party can account for it (docs/threshold-ckks.md):
it was encrypted jointly (``shaper fhe encrypt``, :func:`encrypt_job`) or computed by every
party itself from such inputs (``shaper fhe eval``, :func:`eval_job`); each party keeps that
account, and the key's decryption budget, in its key directory's ledger.

``shaper fhe demo`` (:func:`demo_job`): n parties generate one CKKS key inside the MPC, party 0's
vector x is encrypted jointly, every party computes y = rot(x * x, r) itself, and all decrypt y
jointly, each flooding its share by the worst-case error bound of y. Every party compares the
result with numpy.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..crypto import ckks
from ..errors import ConfigError, KeyValidationError
from ..ml.cnn.params import CNN_BUDGET, CNN_CHAIN, CNN_ROTATIONS
from ..net import launch
from ..net.phases import Progress
from ..protocols import threshold_ckks as tc
from ..protocols.additive import AdditiveEngine
from ..protocols.triples import OtTriples

__all__ = ["check_digest", "check_new_key_dirs", "decrypt_job", "decrypt_local", "demo_job", "encrypt_job",
           "encrypt_local", "engine_for", "eval_job", "eval_local", "key_security", "keygen_job", "keygen_local",
           "local_key_dirs", "parameters", "read_vector"]


def engine_for(session: Any, security: str = "passive") -> Any:
    """The n-party engine key generation, joint encryption and decryption run on: the passive
    additive engine (OT-extension preprocessing) or, with ``security="active"``, the active one
    (MACs, checked openings, range-checked contributions: any deviation aborts)."""
    if security == "active":
        from ..protocols.active import ActiveEngine

        return ActiveEngine(session)
    if security != "passive":
        raise ConfigError(f"security is 'active' or 'passive', got {security!r}")
    return AdditiveEngine(session, triple_source=OtTriples(), frac_bits=0)


def key_security(keys: Any) -> str:
    """The engine a key works on: "active" for a key made on the active engine (it carries this
    party's MAC shares of s), "passive" otherwise."""
    return "active" if getattr(keys, "macs", None) is not None else "passive"


def parameters(chain: tuple, insecure: bool = False) -> ckks.Parameters:
    """The CKKS parameters of ``chain`` (N, q bits, p bits, scale bits)."""
    n, q_bits, p_bits, scale_bits = chain
    return ckks.Parameters.from_literal(n, list(q_bits), p_bits, scale_bits, insecure=insecure)


# -- key generation --------------------------------------------------------------------------------

def keygen_job(session: Any, chain: tuple = CNN_CHAIN, *, rotations: Iterable[int] = (), conjugation: bool = False,
               method: str = "exact", check: bool = True, insecure: bool = False, budget: int = tc.DEFAULT_BUDGET,
               out: str | os.PathLike | None = None, progress: Progress | None = None, engine: Any = None,
               security: str = "passive") -> dict:
    """One party's key generation as a job: builds the engine (``engine``, default
    :func:`engine_for`) and the parameters from ``chain`` (N, q bits, p bits, scale bits), runs
    :func:`~shaper.protocols.threshold_ckks.keygen`, writes the keys to ``out`` (a new
    directory) when given, and returns the phases (time, bytes this party sent), key sizes and
    totals as plain data."""
    params = parameters(chain, insecure)
    start, sent0 = time.perf_counter(), session.stats.bytes_sent
    if engine is None:
        from .mpc import agree_on_security

        agree_on_security(session, security)
        engine = engine_for(session, security)
    keys = tc.keygen(engine, params, rotations=rotations,
                     conjugation=conjugation, method=method, check=check, budget=budget, progress=progress)
    seconds = time.perf_counter() - start
    if out is not None:
        keys.save(out)
    return {"party": session.name, "parties": session.n, "seconds": seconds,
            "bytes_sent": session.stats.bytes_sent - sent0, "phases": [_phase_row(p) for p in keys.phases],
            "sizes": keys.sizes(), "rotation_keys": len(keys.galois), "method": method,
            "fingerprint": params.fingerprint.hex(), "out": None if out is None else str(out),
            "security": key_security(keys),
            "budget": keys.ledger.budget, "budget_left": keys.ledger.remaining}


def _phase_row(p: Any) -> dict:
    """A key-generation phase as the reports have always shown it: name, seconds, bytes sent, items."""
    return {"name": p.name, "seconds": p.seconds, "bytes_sent": p.bytes_sent, "items": p.items}


def keygen_local(parties: int, out: str | os.PathLike, chain: tuple, options: dict,
                 progress: Progress | None = None) -> list[dict]:
    """Every party's :func:`keygen_job` here, as processes over loopback TLS, party i's keys in
    ``out/party<i>``; ``progress`` gets party 0's events. Refuses an ``out`` that already holds
    key directories before any party starts."""

    check_new_key_dirs(out, parties)
    return launch(parties, _keygen_party, str(out), chain, options, progress, timeout=None)


def check_new_key_dirs(out: str | os.PathLike, parties: int) -> None:
    """Refuses an ``out`` that already holds a party's key directory (party0 .. party<n-1>)."""
    if any((Path(out) / f"party{i}").exists() for i in range(parties)):
        raise ConfigError(f"{out} already holds key directories; choose a new --out")


def _keygen_party(session: Any, out: str, chain: tuple, options: dict, progress: Progress | None) -> dict:
    """keygen_job into out/<party>, progress from party 0 only (module level: launch may spawn)."""
    return keygen_job(session, chain, out=str(Path(out) / session.name),
                      progress=progress if session.index == 0 else None, **options)


# -- encryption ------------------------------------------------------------------------------------

def read_vector(path: str | os.PathLike, slots: int | None = None) -> np.ndarray:
    """The numbers of ``path`` (.npy, or .csv/.txt with one number per line) as a vector,
    checked: at least one value, at most ``slots``, every one a finite number. Each failure is a
    :class:`~shaper.errors.ConfigError` naming the file and the problem."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"input file {path} does not exist")
    try:
        if path.suffix == ".npy":
            values = np.load(path, allow_pickle=False)
        else:
            with warnings.catch_warnings():  # an empty file is reported below, not as numpy's warning
                warnings.simplefilter("ignore", UserWarning)
                values = np.loadtxt(path, delimiter=",", ndmin=1)
    except ValueError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"{path}: expected one column of numbers ({first})") from None
    values = np.asarray(values)
    if values.ndim != 1 or not np.issubdtype(values.dtype, np.number):
        raise ConfigError(f"{path}: expected one column of numbers, got shape {values.shape} ({values.dtype})")
    if values.size == 0:
        raise ConfigError(f"{path} holds no values; give one number per line")
    if not np.all(np.isfinite(values)):
        raise ConfigError(f"{path}: the input holds NaN or infinite values")
    if slots is not None and values.size > slots:
        raise ConfigError(f"{path} has {values.size} values; a ciphertext holds {slots} slots")
    return values


def _joint_keys(session: Any, keys_dir: str | os.PathLike, insecure: bool = False,
                security: str | None = None) -> tc.JointKeys:
    """A party's key directory, checked against the session (same parties, same order);
    ``insecure``: accept one made with test parameters (``fhe keygen --insecure``). The engine
    follows the key (:func:`key_security`); ``security`` (a parties file's) must match it."""
    keys = tc.JointKeys.load(keys_dir, insecure=insecure)
    if security is not None and security != key_security(keys):
        raise ConfigError(f"the parties file asks for security = {security!r}, but {keys_dir} holds a key made on the "
                          f"{key_security(keys)} engine: a key runs on the engine it was made on (re-key with shaper "
                          f"fhe keygen --security {security})")
    if keys.share.parties != session.n:
        raise ConfigError(f"{keys_dir} holds a share of a {keys.share.parties}-party key, this job has {session.n} parties")
    if keys.share.index != session.index:
        raise ConfigError(f"{keys_dir} holds party {keys.share.index}'s share, but this is party {session.index} "
                          f"({session.name!r}): parties must keep the order they had at key generation")
    return keys


def read_bounded(path: str | os.PathLike, slots: int, bound: float) -> np.ndarray:
    """:func:`read_vector`, and every |value| within ``bound`` (a ConfigError naming the file)."""
    values = read_vector(path, slots)
    peak = float(np.max(np.abs(values)))
    if peak > bound:
        raise ConfigError(f"{path} holds values up to {peak:.6g}, beyond --bound {bound:g}; pass a larger --bound "
                          "(every party the same)")
    return values


def encrypt_job(session: Any, keys_dir: str | os.PathLike, input_path: str | os.PathLike | None,
                out: str | os.PathLike | None, *, bound: float = 1.0, engine: Any = None, insecure: bool = False,
                security: str | None = None) -> dict:
    """One party's side of a joint encryption (:func:`~shaper.protocols.threshold_ckks.encrypt_jointly`):
    the party with ``input_path`` brings the vector (|values| <= ``bound``, which every party
    must give alike), every party writes the ciphertext to ``out`` (when given) and records it in
    its ledger. Returns the count of values (at the owner), the digest and the file."""
    keys = _joint_keys(session, keys_dir, insecure, security)
    values = None if input_path is None else read_bounded(input_path, keys.params.slots, bound)
    ct = tc.encrypt_jointly(engine if engine is not None else engine_for(session, key_security(keys)), keys, values,
                            value_bound=bound,
                            tag="shaper fhe encrypt")[0]
    if out is not None:
        ckks.save(ct, out)
    return {"party": session.name, "values": None if values is None else int(values.size),
            "out": None if out is None else str(out), "digest": tc.ciphertext_digest(ct)}


def encrypt_local(root: str | os.PathLike, input_path: str | os.PathLike, out: str | os.PathLike, *,
                  parties: int | None = None, bound: float = 1.0, insecure: bool = False) -> list[dict]:
    """Every party's :func:`encrypt_job` here from ``root/party0 ..``: party 0 brings the
    values and writes ``out``; every party records the input in its own ledger."""
    dirs = local_key_dirs(root, parties)
    read_vector(input_path)  # a clear error before any party starts
    return launch(len(dirs), _encrypt_party, str(root), str(input_path), str(out), bound, insecure)


def _encrypt_party(session: Any, root: str, input_path: str, out: str, bound: float, insecure: bool) -> dict:
    me = session.index == 0
    return encrypt_job(session, str(Path(root) / session.name), input_path if me else None, out if me else None,
                       bound=bound, insecure=insecure)


# -- agreed evaluation ----------------------------------------------------------------------------

def eval_job(keys_dir: str | os.PathLike, circuit: str, ciphertexts: Iterable[str | os.PathLike],
             out: str | os.PathLike | None, *, insecure: bool = False) -> dict:
    """One party's evaluation (no network): the circuit ``circuit`` (e.g. "square,rotate:1") on
    the ciphertext files, which its ledger must hold; the outputs are recorded in the ledger and
    written to ``out`` (one output; the first when several)."""
    keys = tc.JointKeys.load(keys_dir, insecure=insecure)
    plan = tc.parse(circuit)
    inputs = []
    for path in ciphertexts:
        ct = ckks.load(path, keys.params)
        if not isinstance(ct, ckks.Ciphertext):
            raise ConfigError(f"{path} does not hold a CKKS ciphertext")
        inputs.append(ct)
    start = time.perf_counter()
    outputs = tc.evaluate(keys, plan, inputs)
    seconds = time.perf_counter() - start
    if out is not None:
        ckks.save(outputs[0], out)
    entry = keys.ledger.find(outputs[0])
    return {"circuit": plan.name, "outputs": [tc.ciphertext_digest(c) for c in outputs], "seconds": seconds,
            "out": None if out is None else str(out), "error_bound": entry.error, "scale": outputs[0].scale}


def eval_local(root: str | os.PathLike, circuit: str, ciphertexts: list[str], out: str | os.PathLike,
               parties: int | None = None, insecure: bool = False) -> list[dict]:
    """:func:`eval_job` at every party's key directory under ``root`` (party 0 writes ``out``)."""
    return [eval_job(d, circuit, ciphertexts, out if k == 0 else None, insecure=insecure)
            for k, d in enumerate(local_key_dirs(root, parties))]


# -- decryption ------------------------------------------------------------------------------------

def check_digest(digest: str | None) -> str | None:
    """A ``--digest`` value: None, or exactly 64 hex digits (a full SHA-256; a prefix, or an
    empty string, would consent to ciphertexts the party never saw)."""
    if digest is None:
        return None
    d = digest.strip().lower()
    if len(d) != 64 or any(c not in "0123456789abcdef" for c in d):
        raise ConfigError(f"--digest takes the full 64-hex SHA-256 of the ciphertext, got {digest!r}")
    return d


def decrypt_job(session: Any, keys_dir: str | os.PathLike, ciphertext: str | os.PathLike, *, to: str | None = None,
                digest: str | None = None, policy: tc.FloodPolicy = tc.FloodPolicy(), engine: Any = None,
                insecure: bool = False, security: str | None = None) -> dict:
    """One party's part of a joint decryption as a job: loads its key directory (share and
    ledger) and the ciphertext file, and decrypts to party ``to`` (every party when None). It
    consents only to a ciphertext its ledger accounts for (a joint input, or an output of an
    evaluation it ran), while the budget lasts, and, with ``digest`` (64 hex), only to that one."""
    keys = _joint_keys(session, keys_dir, insecure, security)
    want = check_digest(digest)
    ct = ckks.load(ciphertext, keys.params)
    if not isinstance(ct, ckks.Ciphertext):
        raise ConfigError(f"{ciphertext} does not hold a CKKS ciphertext")
    if to is not None and to not in session.parties:
        raise ConfigError(f"decryption recipient {to!r} is not a party of this job ({', '.join(session.parties)})")
    target = None if to is None else session.parties.index(to)
    start = time.perf_counter()
    values = tc.decrypt(engine if engine is not None else engine_for(session, key_security(keys)), keys, ct, to=target,
                        policy=policy,
                        approve=None if want is None else lambda req: req["digests"] == [want])
    flood = tc.plan_flood(keys, [ct], policy)
    return {"party": session.name, "digest": tc.ciphertext_digest(ct), "values": values,
            "seconds": time.perf_counter() - start, "scale": ct.scale, "precision_bits": flood.precision_bits,
            "sigma": flood.sigma, "error_bound": flood.error_bound, "budget_left": keys.ledger.remaining,
            "budget": keys.ledger.budget}


def local_key_dirs(root: str | os.PathLike, parties: int | None = None) -> list[Path]:
    """The party directories ``root/party0 ..`` of ``shaper fhe keygen --local N``, in party
    order; with ``parties`` given, exactly that many must be there."""
    root = Path(root)
    found = sorted((p for p in root.glob("party*") if p.is_dir() and p.name[5:].isdigit()),
                   key=lambda p: int(p.name[5:]))
    if len(found) < 2 or [p.name for p in found] != [f"party{i}" for i in range(len(found))]:
        raise ConfigError(f"{root} holds no party directories (party0, party1, ...) from 'shaper fhe keygen --local'")
    if parties is not None and parties != len(found):
        raise ConfigError(f"{root} holds the key directories of {len(found)} parties, not {parties}")
    return found


def decrypt_local(root: str | os.PathLike, ciphertext: str | os.PathLike, *, parties: int | None = None,
                  to: str | None = None, digest: str | None = None,
                  policy: tc.FloodPolicy = tc.FloodPolicy(), insecure: bool = False) -> list[dict]:
    """Every party's :func:`decrypt_job` here, from the key directories under ``root``."""
    dirs = local_key_dirs(root, parties)
    check_digest(digest)
    return launch(len(dirs), _decrypt_party, str(root), str(ciphertext), to, digest, policy, insecure)


def _decrypt_party(session: Any, root: str, ciphertext: str, to: str | None, digest: str | None,
                   policy: tc.FloodPolicy, insecure: bool) -> dict:
    return decrypt_job(session, str(Path(root) / session.name), ciphertext, to=to, digest=digest, policy=policy,
                       insecure=insecure)


# -- the demo --------------------------------------------------------------------------------------

def demo_job(session: Any, chain: tuple, rotations: tuple[int, ...], method: str, insecure: bool,
             verbose: bool, engine: Any = None, security: str = "passive") -> dict:
    """The whole demo in one party (see the module docstring), on the ``security`` engine."""
    def progress(event: dict) -> None:
        if verbose and session.index == 0 and event["status"] == "done":
            print(f"  {event['phase']:<34s} {event['seconds']:7.2f} s {event['bytes'] / 1e6:9.1f} MB sent by party 0",
                  flush=True)

    params = parameters(chain, insecure)
    if engine is None:
        from .mpc import agree_on_security

        agree_on_security(session, security)
        engine = engine_for(session, security)
    start = time.perf_counter()
    keys = tc.keygen(engine, params, rotations=rotations, method=method, progress=progress)
    keygen_s = time.perf_counter() - start
    x = np.sin(np.arange(params.slots) * 0.01)  # party 0's data; the others know it only to check the demo
    t0 = time.perf_counter()
    ct = tc.encrypt_jointly(engine, keys, x if session.index == 0 else None, value_bound=1.0, tag="fhe demo x")[0]
    encrypt_s = time.perf_counter() - t0
    circuit = tc.chain(["square", f"rotate:{rotations[0]}"])
    t0 = time.perf_counter()
    y = tc.evaluate(keys, circuit, [ct])[0]  # every party computes y itself
    compute_s = time.perf_counter() - t0
    flood = tc.plan_flood(keys, [y])
    t0 = time.perf_counter()
    got = tc.decrypt(engine, keys, y)
    decrypt_s = time.perf_counter() - t0
    want = np.roll(x * x, -rotations[0])
    error = float(np.max(np.abs(got - want)))
    bound = 4 * 2.0 ** -flood.precision_bits + flood.error_bound / y.scale  # the flood plus the worst-case error
    if not error < bound:
        raise KeyValidationError(f"joint decryption is off by {error:.3g} (flood and error bound explain {bound:.3g})")
    return {"party": session.name, "keygen_s": keygen_s, "phases": [_phase_row(p) for p in keys.phases],
            "sizes": keys.sizes(), "encrypt_s": encrypt_s, "compute_s": compute_s, "decrypt_s": decrypt_s,
            "error": error, "digest": tc.ciphertext_digest(y), "predicted_bits": flood.precision_bits,
            "error_bound_bits": float(np.log2(flood.error_bound)), "sigma_bits": float(np.log2(flood.sigma)),
            "budget": keys.ledger.budget, "budget_left": keys.ledger.remaining,
            "bytes_sent": session.stats.bytes_sent, "params": repr(params),
            "sample": [float(v) for v in got[:4].real], "expected": [float(v) for v in want[:4].real]}


# -- the commands (cli/fhe.py resolves the options and calls these) ----------------------------------
def print_phases(report: dict) -> None:
    print(f"{'phase':<34s} {'seconds':>8s} {'MB sent':>10s}")
    for p in report["phases"]:
        print(f"{p['name']:<34s} {p['seconds']:8.2f} {p['bytes_sent'] / 1e6:10.1f}")
    print(f"{'total':<34s} {report['seconds']:8.2f} {report['bytes_sent'] / 1e6:10.1f}")
    print("key sizes: " + ", ".join(f"{k} {v / 1e6:.2f} MB" for k, v in report["sizes"].items()))


def show_progress(event: dict) -> None:
    if event["status"] == "start":
        print(f"  ... {event['phase']}", flush=True)
    else:
        print(f"  done {event['phase']}: {event['seconds']:.2f} s, {event['bytes'] / 1e6:.1f} MB sent", flush=True)


def keygen_command(args: Any, local: int | None, chain: tuple, rotations: tuple[int, ...]) -> int:
    """``shaper fhe keygen``: ``local`` parties here, or this party of a parties file."""
    out = Path(args.out)
    budget = args.budget if args.budget is not None else (CNN_BUDGET if rotations == CNN_ROTATIONS else tc.DEFAULT_BUDGET)
    options = {"rotations": rotations, "conjugation": args.conjugation, "method": args.method, "insecure": args.insecure,
               "budget": budget, "security": getattr(args, "engine_security", "passive")}
    if local is not None:
        check_new_key_dirs(out, local)
        print(f"{local} parties as local processes over TLS: joint key generation ({args.method}, "
              f"{options['security']} engine), "
              f"{len(rotations)} rotation keys", flush=True)
        results = keygen_local(local, out, chain, options, show_progress)
        print_phases(results[0])
        print(f"keys written to {out}/party0 .. party{local - 1} (each with its own share and ledger, mode 0600); "
              f"{results[0]['budget_left']} of {results[0]['budget']} decryptions left")
        return 0
    if out.exists():
        raise ConfigError(f"{out} exists already; key directories are never overwritten")
    from ..net import Session

    with Session.from_config(args.parties, me=args.me, key=args.key) as session:
        report = keygen_job(session, chain, out=out, progress=show_progress, **options)
        print_phases(report)
        print(session.stats.table(f"traffic of {args.me}"))
    print(f"keys written to {out} ({report['security']} engine; secret-key share and ledger mode 0600); "
          f"{report['budget_left']} of "
          f"{report['budget']} decryptions left")
    return 0


def write_values(path: str | None, values: np.ndarray) -> None:
    real = np.ascontiguousarray(values.real)
    if path is None:
        shown = ", ".join(f"{v:.6g}" for v in real[:8])
        print(f"slots 0..7: {shown}{', ...' if real.size > 8 else ''}")
    elif path.endswith(".npy"):
        np.save(path, real)
    else:
        np.savetxt(path, real, delimiter=",")


def encrypt_command(args: Any, local: int | None) -> int:
    """``shaper fhe encrypt``: a joint encryption, ``local`` parties here or this party of a parties file."""
    if args.input:  # bad input stops here, in one line, before any party starts
        first = local_key_dirs(args.keys, local)[0] if local is not None else Path(args.keys)
        read_bounded(args.input, tc.PublicKeys.load(first, insecure=args.insecure).params.slots, args.bound)
    if local is not None:
        if not args.input:
            raise ConfigError("with --local pass --input FILE (party0 brings the values)")
        results = encrypt_local(args.keys, args.input, args.out, parties=local, bound=args.bound,
                                insecure=args.insecure)
        r = results[0]
        print(f"{r['values']} values encrypted jointly by {local} parties to {r['out']} (SHA-256 {r['digest']}); "
              "every party's ledger holds it")
        return 0
    from ..net import Session

    with Session.from_config(args.parties, me=args.me, key=args.key) as session:
        r = encrypt_job(session, args.keys, args.input, args.out, bound=args.bound, insecure=args.insecure,
                        security=getattr(args, "file_security", None))
    what = f"{r['values']} values" if r["values"] is not None else "another party's values"
    print(f"{what} encrypted jointly to {r['out']} (SHA-256 {r['digest']}); recorded in {args.keys}'s ledger")
    return 0


def eval_command(args: Any, local: int | None) -> int:
    """``shaper fhe eval``: every party's own evaluation (``local``: every key directory under --keys)."""
    if local is not None:
        r = eval_local(args.keys, args.circuit, args.ciphertext, args.out, parties=local, insecure=args.insecure)[0]
        who = f"each of the {local} parties"
    else:
        r = eval_job(args.keys, args.circuit, args.ciphertext, args.out, insecure=args.insecure)
        who = "this party"
    print(f"{r['circuit']} evaluated by {who} in {r['seconds'] * 1e3:.0f} ms: {r['outputs'][0]} written to "
          f"{r['out']}; worst-case error 2^{np.log2(r['error_bound']):.1f} at scale 2^{np.log2(r['scale']):.1f}")
    return 0


def decrypt_command(args: Any, local: int | None) -> int:
    """``shaper fhe decrypt``: ``local`` parties here from ``--keys``, or this party of a parties file."""
    if not args.keys:
        raise ConfigError("pass --keys DIR (this party's key directory; with --local N the one holding party0 ..)")
    check_digest(args.digest)
    policy = tc.FloodPolicy(mode=args.flood, lam=args.security, work=args.work)
    if local is not None:
        results = decrypt_local(args.keys, args.ciphertext, parties=local, to=args.to, digest=args.digest,
                                policy=policy, insecure=args.insecure)
        report = next(r for r in results if r["values"] is not None)
    else:
        from ..net import Session

        with Session.from_config(args.parties, me=args.me, key=args.key) as session:
            report = decrypt_job(session, args.keys, args.ciphertext, to=args.to, digest=args.digest, policy=policy,
                                 security=getattr(args, "file_security", None),
                                 insecure=args.insecure)
        if report["values"] is None:
            print(f"ciphertext {report['digest']} decrypted jointly for {args.to}; nothing learnt here "
                  f"({report['budget_left']} of {report['budget']} decryptions left)")
            return 0
    print(f"ciphertext {report['digest']} decrypted jointly in {report['seconds'] * 1e3:.0f} ms: each party flooded "
          f"its share with sigma 2^{np.log2(report['sigma']):.1f} (worst-case error 2^"
          f"{np.log2(report['error_bound']):.1f}, {args.flood}, lambda {args.security}), about "
          f"{report['precision_bits']:.1f} bits of precision at scale 2^{np.log2(report['scale']):.1f}; "
          f"{report['budget_left']} of {report['budget']} decryptions left")
    write_values(args.out, report["values"])
    if args.out:
        print(f"real parts of {report['values'].size} slots written to {args.out}")
    return 0


def demo_command(args: Any, local: int | None, chain: tuple) -> int:
    """``shaper fhe demo``: ``local`` parties here, or this party of a parties file."""
    security = getattr(args, "engine_security", "passive")
    if local is not None:
        print(f"{local} parties as local processes over TLS generate one CKKS key in MPC ({args.method}, {security} "
              f"engine); party0's x is encrypted jointly, every party computes rot(x*x, 1), all decrypt jointly",
              flush=True)
        results = launch(local, demo_job, chain, (1,), args.method, args.insecure, True, None, security, timeout=None)
        r, busiest, where_ = results[0], max(x["bytes_sent"] for x in results), "on every party"
    else:
        from ..net import Session

        with Session.from_config(args.parties, me=args.me, key=args.key) as session:
            print(f"{session.n} parties generate one CKKS key in MPC ({args.method}); {session.parties[0]}'s x "
                  "is encrypted jointly, every party computes rot(x*x, 1), all decrypt jointly", flush=True)
            r = demo_job(session, chain, (1,), args.method, args.insecure, True, security=security)
            print(session.stats.table(f"traffic of {args.me}"))
        busiest, where_ = r["bytes_sent"], f"at {args.me}"
    print(r["params"])
    print("key sizes: " + ", ".join(f"{k} {v / 1e6:.2f} MB" for k, v in r["sizes"].items())
          + " (the same for any number of parties)")
    sent = "by the busiest party" if local is not None else f"by {args.me}"
    print(f"key generation {r['keygen_s']:.1f} s, {busiest / 1e6:.0f} MB sent {sent} in all; joint encryption "
          f"{r['encrypt_s'] * 1e3:.0f} ms; compute {r['compute_s'] * 1e3:.0f} ms (every party); joint decryption "
          f"{r['decrypt_s'] * 1e3:.0f} ms")
    print(f"flood per party sigma 2^{r['sigma_bits']:.1f} from the worst-case error 2^{r['error_bound_bits']:.1f} "
          f"(budget {r['budget']}, lambda {tc.SECURITY_LAMBDA}); {r['budget_left']} decryptions left")
    print(f"decrypted {', '.join(f'{v:.6f}' for v in r['sample'])} ... expected "
          f"{', '.join(f'{v:.6f}' for v in r['expected'])}; largest error {r['error']:.2e} "
          f"over all slots ({-np.log2(r['error']):.1f} bits; the flood predicts {r['predicted_bits']:.1f}), {where_}")
    return 0
