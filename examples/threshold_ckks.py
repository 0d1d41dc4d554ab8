"""Three parties hold one CKKS key: they generate it inside the MPC (nobody ever holds the secret
key), encrypt the first party's vector jointly (no party chooses its noise), each compute the
same circuit themselves, and decrypt jointly to the first; each floods its share by the result's
worst-case error, so the first party learns rot(x*x, 1) and not the key.
Run: ``python examples/threshold_ckks.py`` (about 10 s on 2 cores with the CNN's
128-bit parameters; ``--small`` uses N = 2^12, an insecure test set, in about 2 s).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from shaper.crypto import ckks
from shaper.jobs.fhe import engine_for
from shaper.ml.cnn.params import cnn_parameters
from shaper.net import launch
from shaper.protocols import threshold_ckks as tc


def job(session, small: bool, out: str) -> dict:
    params = (ckks.Parameters.from_literal(2 ** 12, [50, 40, 40], 50, 40, insecure=True) if small
              else cnn_parameters())
    engine = engine_for(session)  # n-party MPC, OT-extension preprocessing
    keys = tc.keygen(engine, params, rotations=[1])  # every party runs this; its share stays here
    keys.save(Path(out) / session.name)  # public keys, this party's share and ledger (mode 0600)

    x = np.linspace(-1, 1, params.slots)
    # party 0's values, encrypted jointly: c1 from a seed no party chose, every party's own error
    ct = tc.encrypt_jointly(engine, keys, x if session.index == 0 else None, value_bound=1.0)[0]
    # every party computes y itself (CKKS evaluation is deterministic): each can account for it
    y = tc.evaluate(keys, tc.chain(["square", "rotate:1"]), [ct])[0]
    flood = tc.plan_flood(keys, [y])  # the flood each party adds, from y's worst-case error
    got = tc.decrypt(engine, keys, y, to=0)  # consent, budget, per-party flood, opening to party 0
    return {"got": got, "want": np.roll(x * x, -1), "phases": keys.phases, "sizes": keys.sizes(), "flood": flood,
            "left": keys.ledger.remaining}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="N = 2^12 test parameters (not secure)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as out:
        results = launch(3, job, args.small, out)
        print("party0's key directory:", sorted(p.name for p in (Path(out) / "party0").iterdir()))
    r = results[0]
    for p in r["phases"]:
        print(f"  {p.name:<32s} {p.seconds:6.2f} s {p.bytes_sent / 1e6:8.1f} MB sent by party0")
    print("key sizes:", {k: f"{v / 1e6:.2f} MB" for k, v in r["sizes"].items()})
    print("party0 decrypted rot(x*x, 1):", np.round(r["got"][:4].real, 5), "... expected", np.round(r["want"][:4], 5))
    f = r["flood"]
    print(f"each party flooded its share with sigma 2^{np.log2(f.sigma):.1f} (worst-case error 2^"
          f"{np.log2(f.error_bound):.1f}, budget {f.budget}, lambda {f.policy.lam}); {r['left']} decryptions left")
    print(f"largest error over all slots: {np.max(np.abs(r['got'] - r['want'])):.2e} (the flood predicts "
          f"{f.precision_bits:.1f} bits); parties 1 and 2 learnt nothing: "
          f"{results[1]['got'] is None and results[2]['got'] is None}")


if __name__ == "__main__":
    main()
