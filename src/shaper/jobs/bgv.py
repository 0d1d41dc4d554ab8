"""The jobs of ``shaper fhe aes``: AES-128 evaluated homomorphically under BGV (GHS's packed
layout, docs/bgv.md), checked against the clear AES (``cryptography``'s AES-128-ECB, an
implementation independent of ours).

* :func:`aes_single_key` — one process generates the keys, encrypts the blocks and the expanded
  key, evaluates the circuit and decrypts.
* :func:`aes_party` — one party of threshold GHS (:mod:`shaper.protocols.threshold_bgv`): the
  parties generate the BGV keys inside the MPC (or load their key directories), the key owner's
  11 round keys and the data owner's blocks are encrypted jointly, every party evaluates AES
  itself, and the output is decrypted jointly to bits for the recipient only.
  :func:`aes_local` runs every party here and checks every block.

Each returns a report: per phase seconds (and bytes this party sent), the parameter set and its
security estimate, the circuit's counts, the output's level and noise room, and the check.

What the threshold job's setup round shows every party: the parameters' fingerprint, the roles,
whether each party has key directories, the number of blocks (the recipient learns it anyway) and
two flags, whether the key owner's key and the data owner's first block are FIPS-197's (so the
recipient can check block 0 when they are). A party that announces something else stops every
party with a ConfigError naming it; a false flag only makes the recipient's FIPS check fail.
The protocol's own rules (joint inputs, consent, decryption to bits) are
:mod:`shaper.protocols.threshold_bgv`'s.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..crypto.ckks.multiparty import DEFAULT_BUDGET
from ..errors import ConfigError

__all__ = ["FIPS_197_KEY", "FIPS_197_PLAINTEXT", "aes_command", "aes_local", "aes_party", "aes_single_key",
           "clear_aes", "default_data", "resolve_params"]

# FIPS-197 Appendix C.1: the first block of a run without --key is this vector
FIPS_197_KEY = bytes(range(16))
FIPS_197_PLAINTEXT = bytes.fromhex("00112233445566778899aabbccddeeff")
FIPS_197_CIPHERTEXT = bytes.fromhex("69c4e0d86a7b0430d8cdb78070b4c55a")


def clear_aes(blocks: np.ndarray, key: bytes) -> np.ndarray:
    """AES-128-ECB of (n, 16) uint8 blocks by ``cryptography`` (the check's oracle)."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    out = enc.update(np.ascontiguousarray(blocks, dtype=np.uint8).tobytes()) + enc.finalize()
    return np.frombuffer(out, dtype=np.uint8).reshape(-1, 16)


def resolve_params(params: str, insecure: bool = False) -> Any:
    """The named BGV parameter set; an insecure one only with ``insecure`` (ConfigError otherwise)."""
    from ..crypto.bgv import params as bgv_params

    try:
        p = bgv_params.named(params)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if p.insecure and not insecure:
        raise ConfigError(f"parameter set {params!r} is an insecure test or comparison set "
                          f"({p.security or 'not rated'}); pass --insecure to run it")
    return p


def default_data(blocks: int) -> np.ndarray:
    """FIPS-197 C.1's plaintext, then random blocks (os.urandom): (blocks, 16) uint8."""
    data = np.frombuffer(os.urandom(16 * blocks), dtype=np.uint8).reshape(blocks, 16).copy()
    data[0] = np.frombuffer(FIPS_197_PLAINTEXT, dtype=np.uint8)
    return data


def aes_single_key(blocks: int | None = None, params: str = "aes-53261", key: bytes | None = None,
                   data: np.ndarray | None = None, insecure: bool = False,
                   progress: Callable[[str, float], None] | None = None) -> dict[str, Any]:
    """AES-128 of ``blocks`` blocks under one BGV key. ``data``: (n, 16) uint8 blocks (default:
    FIPS-197 C.1's plaintext first, then random blocks); ``key``: 16 bytes (default: FIPS-197's
    key when ``data`` is not given, else random). ``progress(phase, seconds)`` is called after
    each phase. Raises ConfigError naming the problem for a bad block count, key or data."""
    from ..crypto.bgv import aes, scheme
    from ..crypto.bgv.slots import SlotEvaluator

    p = resolve_params(params, insecure)
    alg = scheme.algebra(p.m)
    layout = aes.aes_layout(alg)
    capacity = layout.nblocks
    if data is not None:
        data = np.asarray(data, dtype=np.uint8)
        if data.ndim != 2 or data.shape[1] != 16 or not 1 <= len(data) <= capacity:
            raise ConfigError(f"the data must be 1..{capacity} blocks of 16 bytes, got shape {data.shape}")
        blocks = len(data)
    if blocks is None:
        blocks = capacity
    if not 1 <= int(blocks) <= capacity:
        raise ConfigError(f"--blocks takes 1..{capacity} for parameter set {params!r} (m = {p.m}: "
                          f"{alg.nslots} slots of GF(2^{alg.d}), 16 bytes per block)")
    blocks = int(blocks)
    if key is None:
        key = FIPS_197_KEY if data is None else os.urandom(16)
    if len(key) != 16:
        raise ConfigError(f"an AES-128 key is 16 bytes, got {len(key)}")
    if data is None:
        data = default_data(blocks)

    phases: list[dict[str, Any]] = []

    def lap(name: str, t0: float) -> float:
        seconds = time.perf_counter() - t0
        phases.append({"name": name, "seconds": round(seconds, 3)})
        if progress:
            progress(name, seconds)
        return time.perf_counter()

    t = time.perf_counter()
    plan = aes.AesCircuit(SlotEvaluator(alg)).plan()
    keys = scheme.keygen(p, plan["automorphisms"])
    t = lap(f"key generation ({plan['key_switching_keys']} key-switching keys)", t)
    ev = scheme.Evaluator(p, keys.relin, keys.galois)
    circuit = aes.AesCircuit(ev)
    t = lap("circuit constants (encoded once)", t)
    state = scheme.encrypt(keys.public, ev.encode(aes.pack_blocks(data, alg)))
    round_keys = [scheme.encrypt(keys.public, ev.encode(v)) for v in aes.pack_round_keys(key, alg)]
    t = lap("encrypt blocks and the 11 round keys", t)
    out = circuit.encrypt(state, round_keys)
    t = lap("evaluate AES-128", t)
    got = aes.unpack_blocks(scheme.decrypt(keys.secret, out), alg, blocks)
    lap("decrypt", t)
    want = clear_aes(data, key)
    wrong = int(np.count_nonzero(np.any(got != want, axis=1)))
    fips = bool(data is not None and key == FIPS_197_KEY and bytes(data[0]) == FIPS_197_PLAINTEXT
                and bytes(got[0]) == FIPS_197_CIPHERTEXT)
    return {
        "params": params, "m": p.m, "phi": p.phi, "slots": alg.nslots, "d": alg.d, "blocks": blocks,
        "security": p.security, "log_qp": round(p.log_qp, 1), "chain_primes": len(p.primes),
        "special_primes": len(p.special), "digits": p.digits,
        "secret": "ternary" if p.hamming_weight is None else f"weight {p.hamming_weight}",
        "plan": {k: plan[k] for k in ("multiplications", "constant_multiplications", "key_switches", "depth",
                                      "key_switching_keys")},
        "levels_used": p.max_level - out.level, "level_left": out.level, "capacity_bits": round(out.capacity(), 1),
        "phases": phases, "wrong_blocks": wrong, "correct": wrong == 0, "fips_197_c1": fips,
        "output": got, "expected": want,
    }


# -- threshold GHS: keys in MPC, joint inputs, every party evaluates, joint decryption to bits ----------

def _role(session: Any, who: int | str | None, default: int, what: str) -> int:
    if who is None:
        return default
    if isinstance(who, str):
        if who not in session.parties:
            raise ConfigError(f"{what} {who!r} is not a party of this job ({', '.join(session.parties)})")
        return session.parties.index(who)
    if not 0 <= int(who) < session.n:
        raise ConfigError(f"{what} {who!r} is not a party index 0..{session.n - 1}")
    return int(who)


def aes_party(session: Any, params: str = "aes-53261", *, key_owner: int | str | None = None,
              data_owner: int | str | None = None, recipient: int | str | None = None,
              aes_key: bytes | None = None, data: np.ndarray | None = None, blocks: int | None = None,
              keys_dir: str | os.PathLike | None = None, insecure: bool = False, budget: int = DEFAULT_BUDGET,
              progress: Any = None, engine: Any = None, decrypt: str = "bits") -> dict[str, Any]:
    """One party's side of threshold AES (module docstring). Roles are party names or indices:
    ``key_owner`` (default the first party) passes ``aes_key`` (16 bytes; default FIPS-197's),
    ``data_owner`` (default the last) passes ``data`` ((n, 16) uint8; default FIPS-197 C.1's
    plaintext then random blocks, ``blocks`` of them or as many as the slots hold), ``recipient``
    (default the data owner) learns the result. ``keys_dir``: this party's key directory, loaded when it exists
    (every party must have one then) and written after key generation when it does not. ``decrypt``:
    the joint decryption's method (:data:`~shaper.protocols.threshold_bgv.METHODS`: "bits", the
    phase converted inside the MPC, or "flood", flooded and opened; every party must name the same).
    Returns the phases (seconds, bytes sent), the figures, and at the recipient the blocks."""
    from pathlib import Path

    from ..crypto.bgv import aes, scheme
    from ..crypto.bgv.slots import SlotEvaluator
    from ..net.phases import Phases
    from ..protocols import threshold_bgv as tb
    from .fhe import engine_for

    p = resolve_params(params, insecure)
    alg = scheme.algebra(p.m)
    capacity = aes.aes_layout(alg).nblocks
    me, n = session.index, session.n
    key_owner = _role(session, key_owner, 0, "the AES key owner")
    data_owner = _role(session, data_owner, n - 1, "the data owner")
    recipient = _role(session, recipient, data_owner, "the recipient")
    have = keys_dir is not None and Path(keys_dir).exists()
    if decrypt not in tb.METHODS:
        raise ConfigError(f"--decrypt takes {' or '.join(tb.METHODS)}, got {decrypt!r}")
    mine: dict[str, Any] = {"params": p.fingerprint().hex(), "roles": [key_owner, data_owner, recipient],
                            "have_keys": have, "decrypt": decrypt}
    if aes_key is not None and me != key_owner:
        raise ConfigError(f"an AES key is the key owner's ({session.parties[key_owner]}) to give, not "
                          f"{session.name}'s")
    if (data is not None or blocks is not None) and me != data_owner:
        raise ConfigError(f"the blocks are the data owner's ({session.parties[data_owner]}) to give, not "
                          f"{session.name}'s")
    if me == key_owner:
        aes_key = FIPS_197_KEY if aes_key is None else bytes(aes_key)
        if len(aes_key) != 16:
            raise ConfigError(f"an AES-128 key is 16 bytes, got {len(aes_key)}")
        mine["fips_key"] = aes_key == FIPS_197_KEY
    if me == data_owner:
        if blocks is not None and not 1 <= int(blocks) <= capacity:
            raise ConfigError(f"--blocks takes 1..{capacity} for parameter set {params!r}")
        data = default_data(capacity if blocks is None else int(blocks)) if data is None else np.asarray(data, np.uint8)
        if data.ndim != 2 or data.shape[1] != 16 or not 1 <= len(data) <= capacity:
            raise ConfigError(f"the data must be 1..{capacity} blocks of 16 bytes, got shape {data.shape}")
        mine["blocks"] = len(data)
        mine["fips_block"] = bytes(data[0]) == FIPS_197_PLAINTEXT
    session.broadcast(mine, "bgv-aes-setup")
    setup = {session.name: mine, **session.gather("bgv-aes-setup")}
    for name, theirs in setup.items():
        agreed = ("params", "roles", "have_keys", "decrypt")
        if not isinstance(theirs, dict) or any(theirs.get(k) != mine[k] for k in agreed):
            raise ConfigError(f"party {name!r} runs a different AES job ({ {k: theirs.get(k) for k in agreed} }; "
                              f"ours { {k: mine[k] for k in agreed} }): same parameters, roles and key directories "
                              "(all new or all existing) and decryption method at every party")
    blocks = setup[session.parties[data_owner]].get("blocks")
    if not (isinstance(blocks, int) and 1 <= blocks <= capacity):
        raise ConfigError(f"the data owner announced {blocks!r} blocks; 1..{capacity} fit")
    fips = bool(setup[session.parties[key_owner]].get("fips_key")) and bool(
        setup[session.parties[data_owner]].get("fips_block"))

    engine = engine if engine is not None else engine_for(session)
    phases = Phases(engine, progress)
    start, sent0 = time.perf_counter(), session.stats.bytes_sent
    plan = aes.AesCircuit(SlotEvaluator(alg)).plan()
    if have:
        keys = phases.run("load the key directory", lambda: tb.JointKeys.load(keys_dir, insecure=insecure))
        if keys.params != p or keys.share.parties != n or keys.share.index != me:
            raise ConfigError(f"{keys_dir} holds party {keys.share.index} of {keys.share.parties}'s key for "
                              f"{keys.params.name!r}; this job is party {me} of {n} with {p.name!r}")
        made_active = keys.macs is not None
        if made_active != (getattr(engine, "security", "passive") == "active"):
            raise ConfigError(f"{keys_dir} holds a key made on the {'active' if made_active else 'passive'} engine; "
                              f"run this job on that engine (--security {'active' if made_active else 'passive'})")
        missing = sorted(set(int(u) % p.m for u in plan["automorphisms"]) - {1} - set(keys.galois))
        if missing:
            raise ConfigError(f"{keys_dir} lacks the automorphism keys AES needs (u = {missing[:4]}...)")
        keygen_phases: list = []
    else:
        keys = phases.run("key generation in MPC", lambda: tb.keygen(engine, p, plan["automorphisms"], budget=budget,
                                                                     progress=progress))
        keygen_phases = keys.phases
        if keys_dir is not None:
            keys.save(keys_dir)
    state = phases.run("joint encryption of the blocks", lambda: tb.encrypt_jointly(
        engine, keys, aes.pack_blocks(data, alg) if me == data_owner else None, owner=data_owner, tag="aes-blocks"))
    round_keys = phases.run("joint encryption of the round keys", lambda: tb.encrypt_jointly(
        engine, keys, np.stack(aes.pack_round_keys(aes_key, alg)) if me == key_owner else None, owner=key_owner,
        tag="aes-round-keys"))
    (out,) = phases.run("evaluate AES-128 (every party)", lambda: tb.evaluate(keys, tb.aes128(), state + round_keys))
    room = tb.plan(keys, [out])["room_bits"][0]
    phases.run("wait for every party's evaluation", lambda: session.barrier("bgv-aes-evaluated"))
    bits = phases.run("joint decryption to bits" if decrypt == "bits" else "joint decryption, flooded",
                      lambda: tb.decrypt_many(engine, keys, [out], to=recipient, method=decrypt))
    got = None if bits is None else aes.unpack_blocks(alg.decode(bits[0]), alg, blocks)
    rows = [{"name": ph.name, "seconds": round(ph.seconds, 3), "bytes_sent": ph.bytes_sent} for ph in phases.done]
    return {
        "party": session.name, "parties": n, "params": p.name, "m": p.m, "phi": p.phi, "slots": alg.nslots,
        "d": alg.d, "security": p.security, "log_qp": round(p.log_qp, 1), "chain_primes": len(p.primes),
        "special_primes": len(p.special),
        "secret": "ternary" if p.hamming_weight is None else f"weight {p.hamming_weight}",
        "roles": {"key_owner": session.parties[key_owner], "data_owner": session.parties[data_owner],
                  "recipient": session.parties[recipient]},
        "blocks": blocks, "plan": {k: plan[k] for k in ("multiplications", "constant_multiplications", "key_switches",
                                                        "depth", "key_switching_keys")},
        "phases": rows, "keygen_phases": [{"name": ph.name, "seconds": round(ph.seconds, 3),
                                           "bytes_sent": ph.bytes_sent} for ph in keygen_phases],
        "seconds": round(time.perf_counter() - start, 3), "bytes_sent": session.stats.bytes_sent - sent0,
        "sizes": keys.sizes(), "levels_used": p.max_level - out.level, "capacity_bits": round(room, 1),
        "budget": keys.ledger.budget, "budget_left": keys.ledger.remaining, "fips_197_defaults": fips,
        "fips_197_c1": bool(got is not None and fips and bytes(got[0]) == FIPS_197_CIPHERTEXT),
        "keys_dir": None if keys_dir is None else str(keys_dir), "output": got, "decrypt": decrypt,
    }


def aes_local(parties: int, params: str = "aes-53261", *, blocks: int | None = None, aes_key: bytes | None = None,
              data: np.ndarray | None = None, keys_root: str | os.PathLike | None = None, insecure: bool = False,
              budget: int = DEFAULT_BUDGET, roles: tuple = (None, None, None), progress: Any = None,
              config: Any = None, security: str = "passive", decrypt: str = "bits") -> list[dict[str, Any]]:
    """Every party of :func:`aes_party` here (processes over loopback TLS; ``config`` a
    :class:`~shaper.net.NetConfig`, e.g. shaped); ``roles``: (key owner, data owner, recipient)
    as party names (party0 ..) or None for the defaults; ``keys_root``/party<i> are the key
    directories. Checks every block the recipient got against the clear AES and adds
    ``correct`` / ``wrong_blocks`` to its report."""
    from ..crypto.bgv import aes, scheme
    from ..net import launch

    p = resolve_params(params, insecure)
    names = [f"party{i}" for i in range(parties)]
    for who, what in zip(roles, ("the AES key owner", "the data owner", "the recipient"), strict=True):
        if who is not None and who not in names:
            raise ConfigError(f"{what} {who!r} is not a party of this job ({', '.join(names)})")
    capacity = aes.aes_layout(scheme.algebra(p.m)).nblocks
    if data is None:
        count = capacity if blocks is None else int(blocks)
        if not 1 <= count <= capacity:
            raise ConfigError(f"--blocks takes 1..{capacity} for parameter set {params!r}")
        data = default_data(count)
    key = FIPS_197_KEY if aes_key is None else aes_key
    results = launch(parties, _aes_local_party, params, key, data, None if keys_root is None else str(keys_root),
                     insecure, budget, tuple(roles), progress, security, decrypt, config=config, timeout=None)
    want = clear_aes(data, key)
    for r in results:
        if r["output"] is not None:
            r["wrong_blocks"] = int(np.count_nonzero(np.any(r["output"] != want, axis=1)))
            r["correct"] = r["wrong_blocks"] == 0
            r["fips_197_c1"] = bool(key == FIPS_197_KEY and bytes(data[0]) == FIPS_197_PLAINTEXT
                                    and bytes(r["output"][0]) == FIPS_197_CIPHERTEXT)
    return results


def _aes_local_party(session: Any, params: str, key: bytes, data: np.ndarray, keys_root: str | None, insecure: bool,
                     budget: int, roles: tuple, progress: Any, security: str = "passive",
                     decrypt: str = "bits") -> dict[str, Any]:
    """aes_party for launch (module level: launch may spawn): only the owners use key and data."""
    from pathlib import Path

    from .fhe import engine_for

    me = session.index
    key_owner = _role(session, roles[0], 0, "the AES key owner")
    data_owner = _role(session, roles[1], session.n - 1, "the data owner")
    return aes_party(session, params, key_owner=key_owner, data_owner=data_owner, recipient=roles[2],
                     aes_key=key if me == key_owner else None, data=data if me == data_owner else None,
                     keys_dir=None if keys_root is None else Path(keys_root) / session.name, insecure=insecure,
                     budget=budget, progress=progress if me == 0 else None, engine=engine_for(session, security),
                     decrypt=decrypt)


def _read_inputs(args: Any) -> tuple[bytes | None, np.ndarray | None]:
    """--aes-key and --input, checked."""
    from pathlib import Path

    key = None
    if args.aes_key is not None:
        try:
            key = bytes.fromhex(args.aes_key)
        except ValueError:
            raise ConfigError(f"--aes-key {args.aes_key!r}: expected 32 hex digits") from None
        if len(key) != 16:
            raise ConfigError(f"--aes-key: an AES-128 key is 32 hex digits (16 bytes), got {len(key)} bytes")
    data = None
    if args.input is not None:
        raw = Path(args.input).read_bytes() if Path(args.input).is_file() else None
        if raw is None:
            raise ConfigError(f"--input {args.input}: no such file")
        if not raw or len(raw) % 16:
            raise ConfigError(f"--input {args.input}: {len(raw)} bytes is not a positive multiple of 16 (AES blocks)")
        data = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 16)
        if args.blocks is not None and args.blocks != len(data):
            raise ConfigError(f"--blocks {args.blocks} but --input holds {len(data)} blocks")
    return key, data


def _write_outputs(args: Any, report: dict[str, Any]) -> None:
    from .report import write_json

    if args.out and report.get("output") is not None:
        from ..files import write_atomic

        write_atomic(args.out, report["output"].tobytes(), private=False)
        print(f"decrypted blocks written to {args.out}")
    if args.json:
        figures = {k: v for k, v in report.items() if k not in ("output", "expected")}
        print(f"figures written to {write_json(args.json, figures)}")


def _print_setting(report: dict[str, Any]) -> None:
    sec = f"{report['security']}-bit estimate" if report["security"] else "not rated (comparison or test set)"
    print(f"ring m = {report['m']}, phi = {report['phi']}, {report['slots']} slots of GF(2^{report['d']}); "
          f"{report['chain_primes']} chain primes + {report['special_primes']} special, log2 QP = "
          f"{report['log_qp']:.0f}, {report['secret']} secret, {sec}")
    print(f"circuit: {report['plan']['multiplications']} products (depth {report['plan']['depth']}), "
          f"{report['plan']['constant_multiplications']} constant products, {report['plan']['key_switches']} key "
          f"switches, {report['plan']['key_switching_keys']} key-switching keys; {report['levels_used']} levels used, "
          f"{report['capacity_bits']:.0f} bits of noise room left")


def aes_command(args: Any, local: int | None = None) -> int:
    """``shaper fhe aes``: parse the options; ``--single-key`` runs :func:`aes_single_key`, else
    ``local`` parties here (:func:`aes_local`) or this party of a parties file (:func:`aes_party`).
    Prints the phases and the check; exit 0 when every checked block is right, 1 when one is not."""
    key, data = _read_inputs(args)
    if args.single_key:
        return _single_key_command(args, key, data)
    if args.budget is not None and args.budget < 1:
        raise ConfigError(f"--budget must be a positive number of decryptions, got {args.budget}")
    roles = (args.key_owner, args.data_owner, args.to)

    def show(event: dict) -> None:
        if event["status"] == "done":
            print(f"  {event['phase']:<44s} {event['seconds']:9.2f} s {event['bytes'] / 1e6:10.1f} MB sent", flush=True)

    if local is not None:
        print(f"threshold AES-128 under BGV ({args.params}): {local} parties as local processes over TLS generate "
              "the key in MPC, encrypt the key and the blocks jointly, each evaluate AES, and decrypt jointly "
              f"({'to bits' if args.decrypt == 'bits' else 'flooded'}) for the recipient", flush=True)
        security = getattr(args, "engine_security", "passive")
        results = aes_local(local, args.params, blocks=args.blocks, aes_key=key, data=data, keys_root=args.keys,
                            insecure=args.insecure, budget=args.budget, roles=roles, progress=show, security=security,
                            decrypt=args.decrypt)
        report = next(r for r in results if r["output"] is not None)
        busiest = max(r["bytes_sent"] for r in results)
        where_ = "by the busiest party"
    else:
        from ..net import Session

        with Session.from_config(args.parties, me=args.me, key=args.key) as session:
            print(f"threshold AES-128 under BGV ({args.params}), {session.n} parties: key in MPC, joint inputs, every "
                  f"party evaluates, joint decryption ({'to bits' if args.decrypt == 'bits' else 'flooded'})",
                  flush=True)
            from .fhe import engine_for

            report = aes_party(session, args.params, key_owner=args.key_owner, data_owner=args.data_owner,
                               recipient=args.to, aes_key=key, data=data, blocks=args.blocks, keys_dir=args.keys,
                               insecure=args.insecure, budget=args.budget, progress=show,
                               engine=engine_for(session, getattr(args, "engine_security", "passive")),
                               decrypt=args.decrypt)
            print(session.stats.table(f"traffic of {args.me}"))
        busiest, where_ = report["bytes_sent"], f"by {args.me}"
    print(f"{'phase':<44s} {'seconds':>9s} {'MB sent':>12s}")
    for ph in report["phases"]:
        print(f"{ph['name']:<44s} {ph['seconds']:9.2f} {ph['bytes_sent'] / 1e6:12.1f}")
    print(f"{'whole job':<44s} {report['seconds']:9.2f} {busiest / 1e6:12.1f} ({where_})")
    _print_setting(report)
    roles_ = report["roles"]
    print(f"key owner {roles_['key_owner']}, data owner {roles_['data_owner']}, recipient {roles_['recipient']}; "
          f"{report['budget_left']} of {report['budget']} decryptions left on the key"
          + (f"; keys in {report['keys_dir']}" if report["keys_dir"] else ""))
    ok = True
    if report.get("output") is None:
        print(f"the AES output went to {roles_['recipient']}; nothing learnt here")
    elif "wrong_blocks" in report:
        ok = report["correct"]
        print(f"check against a clear AES-128: {report['blocks'] - report['wrong_blocks']}/{report['blocks']} blocks "
              "right" + ("; block 0 is FIPS-197 C.1's ciphertext 69c4e0d8 6a7b0430 d8cdb780 70b4c55a"
                         if report["fips_197_c1"] else ""))
    elif report["fips_197_defaults"]:
        ok = report["fips_197_c1"]
        print("block 0 " + ("is" if ok else "is NOT") + " FIPS-197 C.1's ciphertext 69c4e0d8 6a7b0430 d8cdb780 "
              f"70b4c55a (the owners used FIPS-197's key and plaintext); {report['blocks']} blocks decrypted here")
    else:
        print(f"{report['blocks']} blocks decrypted here (the key owner's key is not known here to check them)")
    _write_outputs(args, report)
    return 0 if ok else 1


def _single_key_command(args: Any, key: bytes | None, data: np.ndarray | None) -> int:
    print(f"AES-128 under BGV, parameter set {args.params}", flush=True)
    report = aes_single_key(args.blocks, args.params, key, data, args.insecure,
                            progress=lambda name, s: print(f"  {name:44s} {s:9.2f} s", flush=True))
    _print_setting(report)
    evaluate = next(ph["seconds"] for ph in report["phases"] if ph["name"].startswith("evaluate"))
    print(f"evaluation: {evaluate:.1f} s for {report['blocks']} blocks ({evaluate / report['blocks'] * 1e3:.0f} ms "
          f"per block)")
    ok = report["blocks"] - report["wrong_blocks"]
    print(f"check against a clear AES-128: {ok}/{report['blocks']} blocks right"
          + ("; block 0 is FIPS-197 C.1's ciphertext 69c4e0d8 6a7b0430 d8cdb780 70b4c55a" if report["fips_197_c1"]
             else ""))
    _write_outputs(args, report)
    return 0 if report["correct"] else 1
