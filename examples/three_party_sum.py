"""Three organisations add up their private vectors without showing them to each other.

Each party splits its vector into three additive shares over Z_2^64 (uniform, from the session's
CSPRNG), keeps one and sends one to each peer; every party adds the shares it holds and
broadcasts that sum; everyone then learns only the total. Semi-honest, any single party learns
nothing beyond the total.

Run all three parties on this machine (processes over loopback TLS):

    python examples/three_party_sum.py --local 3

Or one process per host (or per terminal), with a parties file from ``shaper certs``:

    shaper certs --parties alice bob carol --out certs --write-parties parties.toml
    python examples/three_party_sum.py --parties parties.toml --me alice   # and bob, carol
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from shaper.net import Session, launch

LENGTH = 1000


def private_input(name: str) -> np.ndarray:
    """Each party's secret data (deterministic here so the result can be checked)."""
    seed = sum(name.encode())
    return (np.arange(LENGTH, dtype=np.uint64) * np.uint64(seed)) % np.uint64(1_000_003)


def secure_sum(session: Session) -> dict:
    x = private_input(session.name)
    shares = [session.prg.uint64(LENGTH) for _ in range(session.n - 1)]
    mine = x - np.sum(shares, axis=0, dtype=np.uint64)  # wraps mod 2^64 by design
    for peer, share in zip(session.peers, shares):
        session.send(peer, share, tag="share")
    held = mine + np.sum([session.recv_array(p, "share", dtype=np.uint64, shape=(LENGTH,)) for p in session.peers],
                         axis=0, dtype=np.uint64)
    session.broadcast(held, tag="partial")
    total = held + np.sum([session.recv_array(p, "partial", dtype=np.uint64) for p in session.peers],
                          axis=0, dtype=np.uint64)
    return {"party": session.name, "total_head": total[:5].tolist(), "checksum": int(total.sum(dtype=np.uint64)),
            "traffic": session.stats.as_dict()}


def expected_checksum(names: list[str]) -> int:
    return int(np.sum([private_input(n) for n in names], axis=0, dtype=np.uint64).sum(dtype=np.uint64))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--local", type=int, metavar="N", help="run N parties as local processes")
    ap.add_argument("--parties", help="parties file (TOML) for running one party per process/host")
    ap.add_argument("--me", help="this process's party name (with --parties)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args()
    if args.local:
        names = ["alice", "bob", "carol", "dave", "erin"][: args.local] if args.local <= 5 else args.local
        results = launch(names, secure_sum)
        ok = all(r["checksum"] == expected_checksum([r2["party"] for r2 in results]) for r in results)
        for r in results:
            print(f"{r['party']:>6}: total starts {r['total_head']}, sent {r['traffic']['bytes_sent']} B")
        print(f"all parties agree with the plaintext sum: {'yes' if ok else 'NO'}")
        if args.json:
            print(json.dumps(results))
        raise SystemExit(0 if ok else 1)
    if not (args.parties and args.me):
        ap.error("give --local N, or --parties FILE --me NAME")
    with Session.from_config(args.parties, me=args.me) as session:
        result = secure_sum(session)
        ok = result["checksum"] == expected_checksum(session.parties)
        print(f"{args.me}: total starts {result['total_head']}; matches the plaintext sum: {'yes' if ok else 'NO'}")
        print(session.stats.table(f"traffic of {args.me}"))
        if args.json:
            print(json.dumps(result))
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
