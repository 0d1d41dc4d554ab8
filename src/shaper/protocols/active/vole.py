"""Silent authenticated randomness: MAC'd random values from a short base VOLE stretched by LPN
(Boyle–Couteau–Gilboa–Ishai–Kohl–Scholl, CCS 2019; over prime fields with malicious security as
in Wolverine, Weng–Yang–Katz–Wang, S&P 2021), so that authenticating a value costs one
correction word per peer instead of MASCOT's 40 OT corrections per key.

**What it makes.** For an owner o and a modulus q: N values y known to o and authenticated
under the global MAC key (o's share is y, every other party's share is zero; every party holds
MAC shares under the K keys), the same form as :func:`~.preprocessing.input_masks`. One run makes
a batch for every owner at once; :class:`SilentPool` hands them out in order.

**How** (per owner o, modulus q; every party plays o's role for its own batch):

1. *Base.* o's k + t + 1 uniform residues (u, beta, z): on the first run authenticated by
   MASCOT's correlated OTs (:func:`~.cope.cope_split`, o the only sender), after that
   the last run's first k + t + 1 outputs of o's.
2. *Noise.* o draws t positions p_g < 2^h; its sparse vector e has beta_g at position
   g 2^h + p_g. For every other party i: i expands t GGM trees (random roots) with leaves v^i;
   o takes, through one OT per level of the extension (:meth:`~shaper.protocols.ot.OtLinks.rows`,
   with its consistency check), the XOR of the level's nodes on the side away from p_g, and so
   learns every leaf but p_g. i sends d_g = M_i(beta_g) + sum_x v^i_gx per key (M_i: its MAC
   share). Then i's MAC shares of e are -v^i, and o's are sum_i v^i_x off the points and
   M_o(beta_g) + sum_i (d_g - sum_{x != p_g} v^i_gx) at them: the shares add up to alpha e.
3. *LPN.* y = A u + e with A the public 10-sparse code of :func:`shaper.kernels.vole.lpn`; every
   party applies A to its MAC shares of u and adds its MAC shares of e (all linear).
4. *Check.* Coins drawn after every message weigh every base value and every output; the
   combination plus z is opened and goes to the MAC check (:meth:`~.engine.ActiveEngine.check`)
   with the rest of the job's openings, before anything depending on the batch is output.

**Pairwise pools.** A pairwise proof between the owner and one verifier i (:mod:`.ranges`)
needs the pair's own VOLE, K_i = M + alpha_i y, not only the sum over every party. With
``pairwise`` the owner keeps its MAC shares per peer through the run (its base's COPE parts,
each peer's leaves and correction at the points, LPN applied to each), which costs the owner
n - 1 times its LPN rows; a verifier's MAC shares are pairwise already. The run's check is the
same (on their sum).

**Parameters** (:data:`LPN`): N = 642,048 outputs from k = 19,870 base values and t = 2,508
regular noise positions in trees of 2^8 leaves, Wolverine's set for its set-up phase (ePrint
2020/925, Table 2; 128-bit security against the attacks analysed there, for any field). The
first run for a modulus authenticates its k + t + 1 base values per owner by COPE (about 21
bytes per output at 61 bits with two keys of 40 bits); every later run takes them from the last
run's first k + t + 1 outputs (each run hands out the other 619,669 per owner), so it costs each
ordered pair 20,064 OTs with 32 bytes of level sums each plus t K words: about 1.1 bytes per
output, against 640 for MASCOT's authentication of a value. The CPU is the LPN encoding (ten
products per output and row) and the leaves' AES.

**Soundness.** The run's check weighs every value with a coin no party chose (a weight is no
likelier than 2/q, :func:`shaper.kernels.vole.weighted_sums`), so a nonzero error in the MAC
shares survives the combination with probability at most 2/q, and the MAC check that follows
passes a nonzero error in the combination with probability 2^-40 per key (:mod:`.shares`): the
engine's 2^-78 per check at 61 bits with two keys.

**What each party learns.** A receiver i: the OT extension's messages (nothing of p_g, by the
OT), o's base corrections (uniform, by COPE), the opened combination (uniform: z). The owner: every
leaf of i's trees but p_g, and d_g, which is masked by v^i at p_g. So y is pseudorandom to every
party but o (LPN), and every party's MAC key stays hidden.

**What a deviating party can do.** An owner: choose its own y (it is its own value: the
consumers treat it as o's input), or make its base inconsistent (MASCOT's check, which it passes
only by guessing bits of a key, each guess halving its chance). A receiver i: send level sums or
d_g that do not fit its trees, which shifts o's MAC shares at positions that depend on p_g: the
check then fails except with probability 1/q per key, and whether it fails can tell i one
predicate of o's points of its choosing (the selective failure that Wolverine's and Ferret's
analyses allow for: the LPN noise keeps its security up to that leak, and on a failure the batch
is discarded). No one can change an honest party's shares, only MAC shares, so a deviation shows
in the MAC check and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ...errors import FrameError
from ...kernels import vole as kernel
from ...kernels.modq import add_mod, mul_mod, neg_mod, sub_mod
from .cope import cope_split
from .shares import AuthShares

__all__ = ["ALL", "LPN", "LpnParams", "SILENT_MIN", "SilentPool", "available", "produce"]


@dataclass(frozen=True)
class LpnParams:
    """A regular-noise LPN instance: ``outputs`` = ``trees`` x 2^``depth`` values from ``base``."""

    outputs: int
    base: int
    trees: int
    depth: int

    def __post_init__(self) -> None:
        if self.outputs != self.trees << self.depth:
            raise ValueError(f"LPN: {self.outputs} outputs are not {self.trees} trees of 2^{self.depth} leaves")

    @property
    def base_values(self) -> int:
        """Base values per run and owner: the LPN secret, the noise values and one mask."""
        return self.base + self.trees + 1

    @property
    def usable(self) -> int:
        """Outputs a run hands out per owner (the rest is the next run's base)."""
        return self.outputs - self.base_values


#: Wolverine's set-up parameters (ePrint 2020/925, Table 2)
LPN = LpnParams(outputs=642_048, base=19_870, trees=2_508, depth=8)
#: the smallest batch of values per modulus that starts a pool run (smaller batches use MASCOT's
#: correlated OTs directly unless the pool holds them already: :func:`~.preprocessing.silent_for`)
SILENT_MIN = 1 << 16
#: the public code's seed: one code for every run (a fixed random code, as LPN allows)
CODE_SEED = b"shaper/vole/lpn1"
#: the pool key of values summed over every party (:func:`produce` with ``shared``)
ALL = -1
#: the OT hash's purpose bits for the level sums (bits 8..15 of the tweak's domain)
PURPOSE = 3 << 8


def available() -> bool:
    """Whether the native kernels are here (every party must agree: a job runs one way)."""
    return kernel.available()


class SilentPool:
    """Batches made by :func:`produce`, per (modulus, keys, owner): this party's values (only
    where it is the owner) and MAC shares, handed out in order. Every party keeps the same
    counts, so takes stay in step. ``pairwise``: the owner keeps its MAC shares per peer
    (:func:`produce`), for proofs run pair by pair (:mod:`.ranges`)."""

    def __init__(self, params: LpnParams = LPN, *, pairwise: bool = False) -> None:
        self.params = params
        self.pairwise = pairwise
        # per (q, keys, owner): batches [values or None, macs (keys, n), next unused]
        self._held: dict[tuple[int, int, int], list[list[Any]]] = {}
        self._reserve: dict[tuple[int, int], dict[int, Any]] = {}  # each owner's next base
        self.made = 0  # outputs handed to the pool, every owner counted
        self.runs = 0

    def available(self, q: int, keys: int, owner: int) -> int:
        return sum(b[1].shape[1] - b[2] for b in self._held.get((q, keys, owner), ()))

    def take(self, engine: Any, q: int, keys: int, owner: int, count: int) -> tuple[np.ndarray | None, np.ndarray]:
        """``count`` of ``owner``'s values mod q (``owner`` :data:`ALL`: the shared pool, whose
        values at this party are its shares): (the values at the owner / None elsewhere, the MAC
        shares (keys, count)); runs :func:`produce` for the owners that run short."""
        return self.take_many(engine, q, keys, {owner: count})[owner]

    def take_many(self, engine: Any, q: int, keys: int, counts: dict[int, int]
                  ) -> dict[int, tuple[np.ndarray | None, np.ndarray]]:
        short = sorted(o for o, c in counts.items() if self.available(q, keys, o) < c)
        while short:
            if ALL in short and len(short) > 1:
                raise ValueError("take the shared pool apart from the owners' pools")
            reserve = self._reserve.setdefault((q, keys), {})
            if short == [ALL]:
                made, nxt = produce(engine, q, keys, range(engine.parties), self.params, shared=True, reserve=reserve)
            else:
                made, nxt = produce(engine, q, keys, short, self.params, reserve=reserve, pairwise=self.pairwise)
            reserve.update(nxt)
            self.runs += 1
            for o, (values, macs) in made.items():
                self._held.setdefault((q, keys, o), []).append([values, macs, 0])
                self.made += macs.shape[1]
            short = [o for o in short if self.available(q, keys, o) < counts[o]]
        out = {}
        for o, c in counts.items():
            batches = self._held[(q, keys, o)]
            parts_v, parts_m = [], []
            while c:
                batch = batches[0]
                start = batch[2]
                step = min(c, batch[1].shape[1] - start)
                parts_m.append(batch[1][:, start:start + step])
                if batch[0] is not None:
                    parts_v.append(batch[0][start:start + step])
                batch[2] += step
                c -= step
                if batch[2] == batch[1].shape[1]:
                    batches.pop(0)
            macs = parts_m[0] if len(parts_m) == 1 else np.concatenate(parts_m, axis=1)
            values = None if not parts_v else parts_v[0] if len(parts_v) == 1 else np.concatenate(parts_v)
            out[o] = (values, macs)
        return out


def produce(engine: Any, q: int, keys: int, owners: Sequence[int], params: LpnParams = LPN, *,
            shared: bool = False, reserve: dict[int, tuple[np.ndarray | None, np.ndarray]] | None = None,
            pairwise: bool = False
            ) -> tuple[dict[int, tuple[np.ndarray | None, np.ndarray]], dict[int, tuple[np.ndarray | None, np.ndarray]]]:
    """One silent-VOLE run (module notes) for every owner in ``owners`` (every party takes part):
    ({owner: (its values at the owner / None elsewhere, this party's MAC shares (keys, count))},
    {owner: the same for the next run's base}). ``shared`` (every party an owner): the first
    dict has one entry under :data:`ALL`, the sum of the owners' values (this party's share: its
    own values), uniform to every party. ``reserve``: each owner's base from an earlier run's
    outputs (:attr:`LpnParams.base_values` of them, as this run returns them); without it the
    base is authenticated by MASCOT's correlated OTs.

    ``pairwise``: at an owner, the MAC shares are its parts per peer instead of their sum: rows
    (peers in order, ``keys`` rows each) S_i with K_i + S_i = alpha_i y, K_i being peer i's MAC
    shares of the owner's values (every pair holds a VOLE with i's key as Delta); the MAC shares
    are alpha_o y + sum_i S_i. The LPN costs (n - 1) times the owner's rows."""
    me, n_parties = engine.me, engine.parties
    owners = sorted(set(owners))
    if shared and owners != list(range(n_parties)):
        raise ValueError("a shared silent-VOLE run needs every party as an owner")
    if shared and pairwise:
        raise ValueError("a shared silent-VOLE run sums its owners: it has no pairwise parts")
    k, t, h, N = params.base, params.trees, params.depth, params.outputs
    m = 1 << h
    kb = params.base_values
    alpha = engine.alpha(q)[:keys]
    links = engine.ot_links()
    peers = [p for p in range(n_parties) if p != me]
    qs = np.uint64(q)

    # 1. base: every owner's (u, beta, z): an earlier run's outputs, or authenticated by COPE
    # with the owner the only sender
    if reserve is not None and all(o in reserve for o in owners):
        base = reserve[me][0] if me in owners else None
        base_mac = {o: reserve[o][1] for o in owners}
    else:
        base = engine.uniform_mod((kb,), (q,))[:, 0] if me in owners else None
        recv_parts, send_parts = cope_split(engine, base if base is not None else np.zeros(kb, np.uint64), q, keys,
                                            owners)
        base_mac = {}
        for o in owners:
            if o == me and pairwise:
                base_mac[o] = np.concatenate([send_parts[p] for p in peers])
            elif o == me:
                mac = mul_mod(alpha[:, None], np.broadcast_to(base, (keys, kb)).copy(), (q,))
                for part in send_parts.values():
                    mac = add_mod(mac, part, qs)
                base_mac[o] = mac
            else:
                base_mac[o] = recv_parts[o]

    # 2. noise: this party's points; trees for the other owners; the level sums by OT
    points = None
    choice = None
    if me in owners:
        points = engine.prg.below(m, t).astype(np.uint64)
        bits = ((points[:, None] >> np.arange(h, dtype=np.uint64)) & np.uint64(1)).astype(np.uint8)
        choice = np.packbits((1 - bits).ravel(), bitorder="little")       # side away from p, per level
    serve = [o for o in owners if o != me]
    count = t * h
    got_t, got_q = links.rows(choice, count, peers if me in owners else [], serve)
    tag = engine._tag("silent-vole")
    mine_v: dict[int, np.ndarray] = {}
    for o in serve:  # this party's trees for owner o
        roots = np.frombuffer(engine.prg.random_bytes(16 * t), dtype=np.uint8).reshape(t, 16)
        leaves, sums = kernel.ggm_expand(roots, h)
        values, tree_sums = kernel.leaf_values(leaves, q, keys, m)
        del leaves
        qrows, tweak = got_q[o]
        h0, h1 = links.hash_rows(np.ascontiguousarray(qrows[:count]), (tweak[0] | PURPOSE, tweak[1]),
                                 links.delta(o))
        pair = sums.reshape(count, 2, 16).copy()
        pair[:, 0] ^= np.asarray(h0, dtype=np.uint8).reshape(count, 16)
        pair[:, 1] ^= np.asarray(h1, dtype=np.uint8).reshape(count, 16)
        d = add_mod(base_mac[o][:, k:k + t], tree_sums, np.uint64(q))
        engine.session.send(o, pair, tag + "/sums")
        engine.session.send(o, d, tag + "/d")
        mine_v[o] = values
    if me in owners:
        mu = None
        at = np.arange(t, dtype=np.int64) * m + points.astype(np.int64)
        fix = np.zeros((keys, t), np.uint64)
        parts = []  # pairwise: each peer's (values, fix)
        for p in peers:
            pair = engine.session.recv_array(p, tag + "/sums", dtype=np.uint8, shape=(count, 2, 16))
            d = engine.session.recv_array(p, tag + "/d", dtype=np.uint64, shape=(keys, t))
            if np.any(d >= np.uint64(q)):
                raise FrameError(f"party {engine.session.parties[p]!r} sent residues out of range in a silent VOLE")
            trows, tweak = got_t[p]
            ht = np.asarray(links.hash_rows(np.ascontiguousarray(trows[:count]), (tweak[0] | PURPOSE, tweak[1])),
                            dtype=np.uint8).reshape(count, 16)
            side = (1 - bits.ravel()).astype(np.int64)
            chosen = np.ascontiguousarray(pair[np.arange(count), side] ^ ht)
            leaves = kernel.ggm_punctured(chosen, points, h)
            values, tree_sums = kernel.leaf_values(leaves, q, keys, m, points)
            del leaves
            if pairwise:
                parts.append((values, sub_mod(d, tree_sums, qs)))
                continue
            mu = values if mu is None else add_mod(mu, values, qs)
            fix = add_mod(fix, sub_mod(d, tree_sums, np.uint64(q)), np.uint64(q))
        if pairwise:  # peer i's part at the points: S_i(beta) + K_i(beta) + v_i(p) = alpha_i beta + v_i(p)
            for i, (values, fix) in enumerate(parts):
                values[:, at] = add_mod(base_mac[me][i * keys:(i + 1) * keys, k:k + t], fix, qs)
            mu = np.concatenate([v for v, _ in parts])
            del parts
        else:
            mu[:, at] = add_mod(base_mac[me][:, k:k + t], fix, np.uint64(q))
        noise = np.zeros(N, np.uint64)
        noise[at] = base[k:k + t]

    # the check's coins, drawn after every message of the run (what follows is local): each
    # owner's base and outputs get weights of their own
    coins = engine.joint_coins("silent-vole")
    base_seeds = [coins.random_bytes(16) for _ in owners]
    out_seeds = [coins.random_bytes(16) for _ in (owners if not shared else [ALL])]
    sums_of: dict[int, np.ndarray] = {}

    # 3. LPN, one pass over every row this party holds; the first kb outputs of every owner are
    # the next run's base (with ``shared``, every owner's MAC shares of the rest summed first:
    # the pool then holds the sum of the owners' values, and the check's sums come with it)
    if shared:
        mac_base = base_mac[me][:, :k].copy()
        noise_mac = mu
        head_base, head_noise = [base[None, :k], base_mac[me][:, :k]], [noise[None, :kb], mu[:, :kb].copy()]
        for o in serve:
            v = mine_v.pop(o)
            head_base.append(base_mac[o][:, :k])
            head_noise.append(neg_mod(v[:, :kb], qs))
            mac_base = add_mod(mac_base, base_mac[o][:, :k], qs)
            noise_mac = sub_mod(noise_mac, v, qs)
        out, sums_of[ALL] = kernel.lpn(np.ascontiguousarray(np.concatenate([base[None, :k], mac_base])),
                                       np.concatenate([noise[None, :], noise_mac]), q, CODE_SEED, out_seeds[0])
        head = kernel.lpn(np.ascontiguousarray(np.concatenate(head_base)),
                          np.ascontiguousarray(np.concatenate(head_noise)), q, CODE_SEED)
        groups = [(ALL, out)]
        heads, row = {}, 0
        for o in [me] + serve:
            width = 1 + keys if o == me else keys
            heads[o] = head[row:row + width]
            row += width
    else:
        rows_base, rows_noise, layout = [], [], []
        for o in owners:
            if o == me:
                rows_base += [base[None, :k], base_mac[o][:, :k]]
                rows_noise += [noise[None, :], mu]
                layout.append((o, 1 + base_mac[o].shape[0]))
            else:
                rows_base.append(base_mac[o][:, :k])
                rows_noise.append(neg_mod(mine_v.pop(o), qs))
                layout.append((o, keys))
        out = kernel.lpn(np.ascontiguousarray(np.concatenate(rows_base)), np.concatenate(rows_noise), q, CODE_SEED)
        groups, heads, row = [], {}, 0
        for o, width in layout:
            groups.append((o, out[row:row + width]))
            heads[o] = out[row:row + width, :kb]
            row += width
    made: dict[int, tuple[np.ndarray | None, np.ndarray]] = {}
    own = {ALL} if shared else {me}  # whose rows start with this party's values
    for key, rows in groups:
        made[key] = (rows[0, kb:], rows[1:, kb:]) if key in own else (None, rows[:, kb:])
    nxt = {o: ((rows[0].copy(), np.ascontiguousarray(rows[1:])) if o == me
               else (None, np.ascontiguousarray(rows))) for o, rows in heads.items()}

    # 4. the check: the coins weigh every base value and every output (the whole run's, the next
    # base included), plus z
    share = np.zeros(1, np.uint64)
    mac = np.zeros(keys, np.uint64)
    if pairwise and me in owners:  # the owner's MAC shares of its base: alpha_o y + sum_i S_i
        base_mac[me] = add_mod(mul_mod(alpha[:, None], np.broadcast_to(base, (keys, kb)).copy(), (q,)),
                               _peer_sum(base_mac[me], keys, q), qs)
    for o, seed in zip(owners, base_seeds):
        rows = np.ascontiguousarray(base_mac[o][:, :kb - 1] if o != me else
                                    np.concatenate([base_mac[o][:, :kb - 1], base[None, :kb - 1]]))
        sums = kernel.weighted_sums(rows, q, seed)
        mac = add_mod(mac, add_mod(sums[:keys], base_mac[o][:, kb - 1], qs), qs)
        if o == me:
            share = add_mod(share, add_mod(sums[keys:], base[kb - 1:], qs), qs)
    for (key, rows), seed in zip(groups, out_seeds):
        sums = sums_of[key] if key in sums_of else kernel.weighted_sums(rows, q, seed)
        if key in own:  # this party's own values first, then its MAC shares (or parts)
            share = add_mod(share, sums[:1], qs)
            if pairwise:
                sums = add_mod(mul_mod(alpha[:, None], np.full((keys, 1), sums[0], np.uint64), (q,))[:, 0],
                               _peer_sum(sums[1:, None], keys, q)[:, 0], qs)
            else:
                sums = sums[1:]
        mac = add_mod(mac, sums, qs)
    engine.open_partial(AuthShares(engine, share[:, None], mac[:, None, None], (q,)), "silent VOLE")
    return made, nxt


def _peer_sum(parts: np.ndarray, keys: int, q: int) -> np.ndarray:
    """sum over peers of a pairwise owner's parts ((peers x keys), cols) -> (keys, cols)."""
    out = parts[:keys]
    for i in range(1, parts.shape[0] // keys):
        out = add_mod(out, parts[i * keys:(i + 1) * keys], np.uint64(q))
    return out
