#!/usr/bin/env python3
"""quant-ref.py - a second implementation of the .mlb quantizers in numpy
float32, written from docs/quant-decisions.md (not from lib/quant/quant.c), used
to work out and check the expected values in tests/unit/check_quant*.c.

Every operation is a numpy float32 scalar operation in the documented
order, so the results are bit for bit the ones the C library must give.
For the Q4_0 fit it also recomputes every candidate's error in exact
rational arithmetic (fractions.Fraction), so a test vector can be chosen
where the winner is clear by a margin, not an artefact of rounding.

    python3 tools/quant-ref.py block X0 X1 ...  # every rule on one block, with
                                                # the fit's 13 candidates
    python3 tools/quant-ref.py cases            # check_quant.c's fit_cases table
    python3 tools/quant-ref.py golden           # check_quant.c's goldens table

Only the Python standard library and numpy are needed; nothing here runs at
test time.
"""
import sys
from fractions import Fraction

import numpy as np

F = np.float32
QK = 32
LEVELS = [F(s) for s in ("-6.0", "-6.2", "-6.4", "-6.6", "-6.8", "-7.0", "-7.2", "-7.4",
                         "-7.6", "-7.8", "-8.0", "-8.2", "-8.4")]
MAGIC = F(12582912.0)  # 1.5 * 2^23


def bits(f):
    return int(np.array([f], dtype=np.float32).view(np.uint32)[0])


def f16bits(f):
    return int(np.array([f], dtype=np.float32).astype(np.float16).view(np.uint16)[0])


def f16val(h):
    return F(np.array([h], dtype=np.uint16).view(np.float16)[0])


def sum32(a):
    """Eight partial sums p[i] = a[i] + a[i+8] + a[i+16] + a[i+24], then
    ((p0+p4)+(p2+p6))+((p1+p5)+(p3+p7))."""
    p = [F(a[i]) for i in range(8)]
    for j in range(8, QK, 8):
        for i in range(8):
            p[i] = F(p[i] + a[j + i])
    return F(F(F(p[0] + p[4]) + F(p[2] + p[6])) + F(F(p[1] + p[5]) + F(p[3] + p[7])))


# ---------------------------------------------------------------- Q8_0

def amax_of(x):
    m = F(0)
    for v in x:
        a = F(abs(v))
        if a > m:
            m = a
    return m


def q8_round(v, inv):
    t = F(F(v * inv) + (F(0.5) if not np.signbit(v) else F(-0.5)))
    if t >= 127:
        return 127
    if t <= -127:
        return -127
    if t != t:
        return 0
    return int(t)  # truncates toward zero


def q8_block(x):
    amax = amax_of(x)
    if amax < F(1e-30):
        return [0] * QK, F(0)
    d = F(amax / F(127))
    inv = F(F(127) / amax)
    return [q8_round(v, inv) for v in x], d


def q8_block_f16(x):
    """(quants, f16 bits), or None when the scale rounds to infinity."""
    amax = amax_of(x)
    if amax < F(1e-30):
        return [0] * QK, 0
    h = f16bits(F(amax / F(127)))
    if h & 0x7fff == 0x7c00:
        return None
    d = f16val(h)
    if d == 0:
        return [0] * QK, h
    inv = F(F(1) / d)
    return [q8_round(v, inv) for v in x], h


# ---------------------------------------------------------------- Q4_0

def xmax_of(x):
    m, xm = F(0), F(0)
    for v in x:
        a = F(abs(v))
        if a > m:
            m, xm = a, F(v)
    return xm, m


def pack(nib):
    return bytes(nib[j] | nib[j + 16] << 4 for j in range(16))


def q4_round_block(x):
    xm, _ = xmax_of(x)
    d = F(xm / F(-8))
    inv = F(F(1) / d) if d != 0 else F(0)
    if not np.isfinite(inv):
        inv = F(0)
    nib = []
    for v in x:
        t = F(F(v * inv) + F(8.5))
        nib.append(15 if t >= 15 else int(t) if t > 0 else 0)
    return pack(nib), d


def round_even(t):
    return F(F(t + MAGIC) - MAGIC)


def candidate(y, w, wy, ymax, k):
    s = F(LEVELS[k] / ymax)
    lv = []
    for j in range(QK):
        li = int(round_even(F(y[j] * s)))
        lv.append(F(min(7, max(-8, li))))
    a = [F(wy[j] * lv[j]) for j in range(QK)]
    b = [F(w[j] * F(lv[j] * lv[j])) for j in range(QK)]
    sxl, sll = sum32(a), sum32(b)
    d = F(sxl / sll) if sll > 0 else F(0)
    e = []
    for j in range(QK):
        r = F(y[j] - F(d * lv[j]))
        e.append(F(w[j] * F(r * r)))
    return d, sum32(e), [int(v) for v in lv]


def row_mean_sq(x):
    s = 0.0
    for v in x:
        s += float(v) * float(v)
    return s / len(x)


def fit_block(x, imp=None, s2=0.0, trace=None):
    x = [F(v) if np.isfinite(v) else F(0) for v in x]
    xm, amax = xmax_of(x)
    if amax == 0:
        return pack([8] * QK), F(0), 0
    scaled = amax < F(1e-6) or amax > F(1e6)
    y = [F(v / amax) for v in x] if scaled else list(x)
    ymax = F(xm / amax) if scaled else xm
    if imp is not None:
        den = s2 + float(amax) * float(amax)
        w = [F(float(imp[j]) * ((s2 + float(x[j]) ** 2) / den) ** 0.5) for j in range(QK)]
    else:
        w = [F(v * v) for v in y]
    wy = [F(w[j] * y[j]) for j in range(QK)]
    best = None
    for k in range(len(LEVELS)):
        d, err, lv = candidate(y, w, wy, ymax, k)
        if trace is not None:
            trace.append((k, lv, d, err))
        if best is None or err < best[1]:
            best = (d, err, lv, k)
    d = F(best[0] * amax) if scaled else best[0]
    return pack([l + 8 for l in best[2]]), d, best[3]


def exact_errors(x, w=None, exact=True):
    """Each candidate's levels and its least-squares error (weights x^2
    unless given), in exact rational arithmetic, or in float64 with
    exact=False, for choosing unambiguous vectors.  Elements of weight 0
    are left out: they add nothing."""
    num_t = Fraction if exact else float
    idx = [j for j in range(QK) if (w is None and x[j] != 0) or (w is not None and w[j] != 0)]
    xs = {j: num_t(float(x[j])) for j in idx}
    ws = {j: (xs[j] * xs[j] if w is None else num_t(float(w[j]))) for j in idx}
    out = []
    xm, _ = xmax_of(x)
    for k in range(len(LEVELS)):
        s = F(LEVELS[k] / xm)
        lv = [min(7, max(-8, int(round_even(F(F(v) * s))))) for v in x]
        num = sum(ws[j] * xs[j] * lv[j] for j in idx)
        den = sum(ws[j] * lv[j] * lv[j] for j in idx)
        d = num / den
        err = sum(ws[j] * (xs[j] - d * lv[j]) ** 2 for j in idx)
        out.append((k, lv, d, err))
    return out


def clear_winner(ex, margin):
    """(k, runner-up error / winner error) of the first candidate with the
    smallest error among distinct level vectors, or None if it wins by less
    than `margin` (a ratio)."""
    seen, uniq = set(), []
    for k, lv, d, err in ex:
        if tuple(lv) not in seen:
            seen.add(tuple(lv))
            uniq.append((k, lv, d, err))
    uniq.sort(key=lambda t: (t[3], t[0]))
    if len(uniq) < 2 or uniq[1][3] <= uniq[0][3] * margin:
        return None
    return uniq[0][0]


# ---------------------------------------------------------------- commands

def block_of(vals):
    return [F(v) for v in vals] + [F(0)] * (QK - len(vals))


def show(vals):
    x = block_of(vals)
    q, d = q8_block(x)
    print("q8_0: d=%r (0x%08x) q=%s" % (float(d), bits(d), q[:len(vals)]))
    qs, d = q4_round_block(x)
    print("q4 round: d=%r (0x%08x) qs=%s" % (float(d), bits(d), qs.hex()))
    tr = []
    qs, d, k = fit_block(x, trace=tr)
    print("q4 fit: winner k=%d d=%r (0x%08x) qs=%s" % (k, float(d), bits(d), qs.hex()))
    for kk, lv, dd, err in tr:
        print("  k=%2d L=%s levels=%s d=%r err=%r" % (kk, LEVELS[kk], lv[:len(vals)], float(dd),
                                                    float(err)))


# Blocks won by each candidate k (values on a 1/16 or 1/64 grid, found by a
# random search over short blocks), as in check_quant.c's fit_cases.
FIT_BLOCKS = [
    [1.0, -0.5, -0.125, -0.6875],
    [1.0, -0.8125, -0.9375, -0.75, -0.8125],
    [1.0, -0.96875, 0.625, 0.671875, 0.609375, 0.015625, -0.5625, -0.4375, -0.921875],
    [1.0, -0.4375],
    [1.0, -0.6875, 0.375, -0.25, 0.875],
    [1.0, 0.4375, -0.9375, -0.0625, 0.5625],
    [1.0, 0.640625, -0.984375, 0.125, -0.5625, -0.984375, 0.96875],
    [1.0, -0.625, -0.5625, -0.8125, -0.9375],
    [1.0, -0.25],
    [1.0, -0.34375, 0.15625, -0.84375, -0.890625],
    [1.0, -0.625, 0.4375],
    [1.0, 0.1875, 0.75, -0.8125],
    [1.0, 0.90625, -0.5625, 0.71875, 0.953125, 0.796875, 0.171875, -0.734375, -0.296875],
]


def cases():
    """The fit_cases table: each block's winner, checked to win by at least
    1% of the error in exact rational arithmetic."""
    for vals in FIT_BLOCKS:
        x = block_of(vals)
        qs, d, k = fit_block(x)
        ex = exact_errors(x)
        assert clear_winner(ex, Fraction(101, 100)) == k, vals
        errs = sorted(set((e[3], tuple(e[1])) for e in ex))
        lits = ", ".join(("%.9g" % v) + ("f" if "." in "%.9g" % v else ".0f") for v in vals)
        print("    /* L %s: levels %s, error %.4g (next best %.4g) */"
              % (LEVELS[k], ex[k][1][:len(vals)], float(ex[k][3]), float(errs[1][0])))
        print('    {%d, {%s}, %d, "%s", 0x%08x},' % (k, lits, len(vals), qs.hex(), bits(d)))


def lcg(state):
    state = (state * 6364136223846793005 + 1442695040888963407) & ((1 << 64) - 1)
    return state, state >> 33


def golden():
    """check_quant.c's goldens: 96 values k / 1024 and importances from a
    64-bit LCG, quantized every way."""
    st, x, imp = 2024, [], []
    for _ in range(96):
        st, u = lcg(st)
        x.append(F(F(int(u % 2001) - 1000) / F(1024)))
    x[40] = F(x[40] * F(8))
    for _ in range(96):
        st, u = lcg(st)
        imp.append(F(F(int(u % 4000) + 1) / F(1000)))
    s2 = row_mean_sq(x)
    for b in range(3):
        xb = x[32 * b:32 * b + 32]
        q, d = q8_block(xb)
        qh, dh = q8_block_f16(xb)
        qr, dr = q4_round_block(xb)
        qf, df, kf = fit_block(xb)
        qi, di, ki = fit_block(xb, imp[32 * b:32 * b + 32], s2)
        hx = lambda v: bytes(c & 0xff for c in v).hex()
        print('    {"%s", 0x%08x, "%s", 0x%04x,\n     "%s", 0x%08x, "%s", 0x%08x, "%s", 0x%08x},'
              ' /* fit L %s, imatrix L %s */' % (hx(q), bits(d), hx(qh), dh, qr.hex(), bits(dr),
                                                qf.hex(), bits(df), qi.hex(), bits(di),
                                                LEVELS[kf], LEVELS[ki]))


def main(argv):
    if len(argv) >= 2 and argv[1] == "block":
        show([float(v) for v in argv[2:]])
    elif len(argv) == 2 and argv[1] == "cases":
        cases()
    elif len(argv) == 2 and argv[1] == "golden":
        golden()
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
