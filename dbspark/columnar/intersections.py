"""The intersection of the holders' keys at one variable of a leapfrog join, for every partial binding at
once, recording each iterator operation as a sensitivity interval (`lftj-incremental-maintenance.txt`
§4.1; used by `columnar/sensitivity.py`, whose docstring and `docs/multiway-joins.md` describe the two
disciplines and why their intervals are sound).

Each function takes the holders' tries at their depths, each binding's prefix key in each holder, the
region [lo, hi] of the variable to intersect over (lo = -1: from the start; hi = the end marker: to
the end) and returns the emitted (binding, code) pairs and, if asked, the operations as
(holder, prefix key, lo, hi, binding).
"""

from __future__ import annotations

import numpy as np

from dbspark.columnar.packed_trie import PackedTrie

Ops = list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]


class _Holders:
    """The holders' levels at the variable, and for each binding the range of its children in each:
    keys in [base, base + 2^bits), positions below `stop`."""

    def __init__(
        self, tries: list[PackedTrie], depth: list[int], keys: list[np.ndarray], end: np.int64
    ) -> None:
        bits = [np.int64(t.bits[d]) for t, d in zip(tries, depth, strict=True)]
        self.end = end
        self.mask = [np.int64((1 << int(b)) - 1) for b in bits]
        self.level = [t.keys[d] for t, d in zip(tries, depth, strict=True)]
        self.base = [kk << b for kk, b in zip(keys, bits, strict=True)]
        self.stop = [
            np.searchsorted(lv, bs + (np.int64(1) << b))
            for lv, bs, b in zip(self.level, self.base, bits, strict=True)
        ]

    def at(self, h: int, pos: np.ndarray, who: np.ndarray) -> np.ndarray:
        """Holder h's code at positions `pos` of bindings `who` (the end marker past a binding's range)."""
        inside = pos < self.stop[h][who]
        cur = np.full(len(pos), self.end, dtype=np.int64)
        cur[inside] = self.level[h][pos[inside]] & self.mask[h]
        return cur


def leapfrog(
    tries: list[PackedTrie],
    depth: list[int],
    keys: list[np.ndarray],
    lo: np.ndarray,
    hi: np.ndarray,
    end: np.int64,
    record: bool,
) -> tuple[np.ndarray, np.ndarray, Ops]:
    """One variable's leapfrog for every binding at once (see the module docstring): the emitted
    (binding, code) pairs, sorted, and (if `record`) each holder's operations as sensitivity intervals:
    (holder, its prefix key, lo, hi, binding)."""
    ops: Ops = []
    k, m = len(tries), len(lo)
    holders = _Holders(tries, depth, keys, end)
    level, base, stop, mask, at = holders.level, holders.base, holders.stop, holders.mask, holders.at

    pos = np.empty((k, m), dtype=np.int64)
    cur = np.empty((k, m), dtype=np.int64)
    who = np.arange(m)
    for h in range(k):  # open (from the start) or seek (to the region's start)
        pos[h] = np.searchsorted(level[h], base[h] + np.maximum(lo, 0))
        cur[h] = at(h, pos[h], who)
        if record:
            ops.append((h, keys[h], lo.copy(), cur[h].copy(), who))
    out_b, out_c = [], []
    if k == 1:  # one iterator: every key up to the region's end is emitted, each followed by a next
        last = np.searchsorted(level[0], base[0] + np.minimum(hi, end - 1), side="right")
        last = np.minimum(last, stop[0])
        take = np.maximum(last - pos[0], 0)
        b = np.repeat(who, take)
        p = np.repeat(pos[0], take) + (np.arange(len(b)) - np.repeat(np.cumsum(take) - take, take))
        c = level[0][p] & mask[0]
        if record:
            ops.append((0, keys[0][b], c, at(0, p + 1, b), b))
        return b, c, ops
    while len(who):
        mx, mn = cur.max(axis=0), cur.min(axis=0)
        going = (mx != end) & (mx <= hi[who])
        who, pos, cur, mx, mn = who[going], pos[:, going], cur[:, going], mx[going], mn[going]
        if not len(who):
            break
        eq = mn == mx
        if eq.any():
            out_b.append(who[eq])
            out_c.append(mn[eq])
        least = np.where(eq, 0, np.argmin(cur, axis=0))  # after an emit the first iterator moves on
        for h in range(k):
            sel = least == h
            if not sel.any():
                continue
            ws = who[sel]
            nxt = eq[sel]
            target = np.where(nxt, cur[h, sel], mx[sel])
            p = np.where(nxt, pos[h, sel] + 1, np.searchsorted(level[h], base[h][ws] + mx[sel]))
            pos[h, sel] = p
            cur[h, sel] = at(h, p, ws)
            if record:
                ops.append((h, keys[h][ws], target, cur[h, sel].copy(), ws))
    if not out_b:
        e = np.zeros(0, dtype=np.int64)
        return e, e, ops
    b, c = np.concatenate(out_b), np.concatenate(out_c)
    order = np.lexsort((c, b))
    return b[order], c[order], ops


def smallest_leads(
    tries: list[PackedTrie],
    depth: list[int],
    keys: list[np.ndarray],
    lo: np.ndarray,
    hi: np.ndarray,
    end: np.int64,
    record: bool,
) -> tuple[np.ndarray, np.ndarray, Ops]:
    """One variable's intersection for every binding at once, led by the holder with the fewest keys in
    the region (`columnar/leapfrog.py`'s discipline): the leader seeks the region's start and moves
    next through its keys, each of which the others seek. Its operations are sensitivity intervals as
    the leapfrog's are (seek [t, v], next [v, v']) and as sound (docs/multiway-joins.md): the leader's
    intervals cover the whole region, and a key the leader has is covered in every other holder by its
    seek. No rounds: a handful of NumPy calls per holder, whatever the keys' number."""
    b, c, ops, _, _, _ = first_keys(tries, depth, keys, lo, hi, end, record, None)
    return b, c, ops


def first_keys(
    tries: list[PackedTrie],
    depth: list[int],
    keys: list[np.ndarray],
    lo: np.ndarray,
    hi: np.ndarray,
    end: np.int64,
    record: bool,
    limit: int | None,
) -> tuple[np.ndarray, np.ndarray, Ops, np.ndarray, np.ndarray, int]:
    """`smallest_leads` over the leader's first `limit` keys in each binding's region (all: None), for
    short-circuit evaluation (`lftj-incremental-maintenance.txt` §2.2.1): the emitted pairs and the
    operations, per binding the leader's last key taken and whether it has more in the region, and the
    number of candidates the leaders gave (each sought by the other holders: the intersections' work). The
    operations cover the region from its start to that last key, as a full evaluation of that part."""
    ops: Ops = []
    k, m = len(tries), len(lo)
    holders = _Holders(tries, depth, keys, end)
    level, base, stop, mask, at = holders.level, holders.base, holders.stop, holders.mask, holders.at

    start = [np.searchsorted(level[h], base[h] + np.maximum(lo, 0)) for h in range(k)]
    upto = [
        np.minimum(np.searchsorted(level[h], base[h] + np.minimum(hi, end - 1), side="right"), stop[h])
        for h in range(k)
    ]
    counts = np.stack([np.maximum(u - s, 0) for s, u in zip(start, upto, strict=True)])
    lead = np.argmin(counts, axis=0)
    who = np.arange(m)
    have = counts[lead, who]
    take = have if limit is None else np.minimum(have, limit)
    rep = np.repeat(who, take)
    nth = np.arange(len(rep)) - np.repeat(np.cumsum(take) - take, take)
    cand = np.empty(len(rep), dtype=np.int64)
    lead_of = lead[rep]
    for h in range(k):
        led = lead == h
        if record and led.any():  # the leader's seek to the region's start
            ops.append((h, keys[h][led], lo[led], at(h, start[h][led], who[led]), who[led]))
        mine = lead_of == h
        if not mine.any():
            continue
        pos = start[h][rep[mine]] + nth[mine]
        cand[mine] = level[h][pos] & mask[h]
        if record:  # its nexts
            ops.append((h, keys[h][rep[mine]], cand[mine], at(h, pos + 1, rep[mine]), rep[mine]))
    keep = np.ones(len(rep), dtype=bool)
    for h in range(k):  # every other holder seeks each candidate
        other = lead_of != h
        if not other.any():
            continue
        b = rep[other]
        landed = at(h, np.searchsorted(level[h], base[h][b] + cand[other]), b)
        keep[other] &= landed == cand[other]
        if record:
            ops.append((h, keys[h][b], cand[other], landed, b))
    last = np.full(m, -1, dtype=np.int64)
    ends = np.cumsum(take) - 1
    last[take > 0] = cand[ends[take > 0]]
    return rep[keep], cand[keep], ops, last, have > take, len(rep)
