#!/usr/bin/env python3
"""mlb.py - an independent reading of the .mlb format and its forward pass
in numpy, written from the specification (mlb(5)), not from the C code.

It is the reference the C runtime is checked against: the header and body
layout are decoded here from the spec's tables, the weights dequantized,
and the forward pass follows the spec's math, with activations quantized
to Q8_0 by the spec's float32 rule before every matrix product, as the
runtime does.  Accumulation order differs from the C kernels (numpy sums
in float64 here), so the two agree to float32 rounding, not bit for bit.

    python3 tools/mlb.py info MODEL.mlb
    python3 tools/mlb.py logits MODEL.mlb ID ID ... > out.f32   (n x vocab float32)
    python3 tools/mlb.py imatrix MODEL.mlb ID ID ... > out.mli  (mli(5), logits for every id)

A model with a type table (wtype 3, mlb(5) TYPE TABLE) is read too: the
table follows the layer flags, one code per matrix, and each matrix is
decoded by its code: F32, the spec's Q8_0 and Q4_0, or ggml's block
layouts (decoded here from ggml's reference dequantizers; Q2_K, Q3_K,
IQ4_XS and MXFP4 are laid out but not decoded).  type_table_bytes()
writes a table for a writer.

The importance matrix is written from the spec's "Importance matrix file"
table: the float input of each matrix product, squared and summed per
channel in float64; a linear-attention layer adds the input of lqkv/lz/
lb/la to the attention slot and, as mli(5) decides, the input of lout to
the first lin_v_heads x lin_v_dim channels of the wo slot.
"""
import math
import struct
import sys

import numpy as np

FIELDS = [  # name, offset, kind (I u32, f f32)
    ("dim", 8, "I"), ("n_layers", 12, "I"), ("n_heads", 16, "I"), ("n_kv_heads", 20, "I"),
    ("hidden_dim", 24, "I"), ("vocab", 28, "I"), ("max_seq", 32, "I"), ("rope_theta", 36, "f"),
    ("norm_eps", 40, "f"), ("wtype", 44, "I"), ("shared_classifier", 48, "I"),
    ("rope_type", 52, "I"), ("rope_factor", 56, "f"), ("rope_low_freq_factor", 60, "f"),
    ("rope_high_freq_factor", 64, "f"), ("rope_orig_max_seq", 68, "I"), ("q8_mask", 72, "I"),
    ("qkv_bias", 76, "I"), ("head_dim", 80, "I"), ("qk_norm", 84, "I"),
    ("rope_attn_factor", 88, "f"), ("sliding_window", 92, "I"), ("layer_flags", 96, "I"),
    ("rope_local_theta", 100, "f"), ("act", 104, "I"), ("post_norms", 108, "I"),
    ("embed_scale", 112, "f"), ("attn_scale", 116, "f"), ("scale_f16", 120, "I"),
    ("attn_softcap", 124, "f"), ("final_softcap", 128, "f"), ("rot_dim", 132, "I"),
    ("attn_gate", 136, "I"), ("lin_k_heads", 140, "I"), ("lin_v_heads", 144, "I"),
    ("lin_k_dim", 148, "I"), ("lin_v_dim", 152, "I"), ("lin_conv", 156, "I"),
    ("pooling", 160, "I"),
]

F32 = np.float32

# Type table codes (mlb(5)): name, weights and bytes per block (None: the
# spec's own layouts).
TYPES = {
    0: ("F32", None, None), 1: ("Q8_0", None, None), 2: ("Q4_0", None, None),
    4: ("Q4_1", 32, 20), 5: ("Q5_0", 32, 22), 6: ("Q5_1", 32, 24), 7: ("Q2_K", 256, 84),
    8: ("Q3_K", 256, 110), 9: ("Q4_K", 256, 144), 10: ("Q5_K", 256, 176),
    11: ("Q6_K", 256, 210), 12: ("IQ4_NL", 32, 18), 13: ("IQ4_XS", 256, 136),
    14: ("MXFP4", 32, 17), 15: ("F16", 1, 2), 16: ("BF16", 1, 2),
}
IQ4NL = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], F32)


def matrix_count(h, flags):
    """Entries of the type table: tok_emb; per layer wq wk wv wo [wg] or
    lqkv lz lb la lout, then w1 w2 w3; wcls unless shared."""
    n = 1 + (0 if h["shared_classifier"] else 1)
    for f in flags:
        n += 8 if f & 8 else 7 + (1 if h["attn_gate"] else 0)
    return n


def type_table_bytes(h, flags, codes):
    """The type table as a writer puts it after the layer flags: the codes,
    zero-padded to 64 bytes."""
    assert len(codes) == matrix_count(h, flags)
    assert all(c in TYPES for c in codes), "a code that is no matrix type"
    b = bytes(codes)
    return b + bytes(-len(b) % 64)


def _f16(raw, off):
    return raw[:, off:off + 2].copy().view("<f2").astype(F32)[:, 0]


def _k4_scales(sc):
    """Q4_K/Q5_K: the 8 six-bit scales and mins of a block's 12 bytes."""
    sc = sc.astype(np.int32)
    d = np.empty((sc.shape[0], 8), np.int32)
    m = np.empty_like(d)
    d[:, :4], m[:, :4] = sc[:, 0:4] & 63, sc[:, 4:8] & 63
    d[:, 4:] = (sc[:, 8:12] & 15) | ((sc[:, 0:4] >> 6) << 4)
    m[:, 4:] = (sc[:, 8:12] >> 4) | ((sc[:, 4:8] >> 6) << 4)
    return d.astype(F32), m.astype(F32)


def dequant_blocks(code, raw):
    """ggml's reference dequantization of n blocks (raw: n x bytes uint8)
    into n x weights float32."""
    name = TYPES[code][0]
    n = raw.shape[0]
    if name == "F16":
        return raw.copy().view("<f2").astype(F32)
    if name == "BF16":
        return (raw.copy().view("<u2").astype(np.uint32) << 16).view(F32)
    if name in ("Q4_1", "Q5_1", "Q5_0", "IQ4_NL"):
        d = _f16(raw, 0)
        m = _f16(raw, 2) if name in ("Q4_1", "Q5_1") else np.zeros(n, F32)
        qs = raw[:, {"Q4_1": 4, "Q5_1": 8, "Q5_0": 6, "IQ4_NL": 2}[name]:]
        lo, hi = (qs & 15).astype(np.int32), (qs >> 4).astype(np.int32)
        if name in ("Q5_0", "Q5_1"):
            qh = raw[:, 4 if name == "Q5_1" else 2:][:, :4].copy().view("<u4").astype(np.int64)
            j = np.arange(16)
            lo = lo | (((qh >> j) & 1) << 4).astype(np.int32)
            hi = hi | (((qh >> (j + 16)) & 1) << 4).astype(np.int32)
        if name == "IQ4_NL":
            return np.concatenate([IQ4NL[lo], IQ4NL[hi]], axis=1) * d[:, None]
        q = np.concatenate([lo, hi], axis=1).astype(F32) - (16 if name == "Q5_0" else 0)
        return (q * d[:, None] + m[:, None]).astype(F32)
    if name in ("Q4_K", "Q5_K"):
        d, dmin = _f16(raw, 0), _f16(raw, 2)
        sc, mn = _k4_scales(raw[:, 4:16])
        qh = raw[:, 16:48] if name == "Q5_K" else None
        qs = raw[:, 48:] if name == "Q5_K" else raw[:, 16:]
        out = np.empty((n, 256), F32)
        for j in range(4):  # 64 weights: the low nibbles, then the high
            q = qs[:, 32 * j:32 * j + 32].astype(np.int32)
            lo, hi = q & 15, q >> 4
            if qh is not None:
                lo = lo | (((qh >> (2 * j)) & 1).astype(np.int32) << 4)
                hi = hi | (((qh >> (2 * j + 1)) & 1).astype(np.int32) << 4)
            for k, v in ((0, lo), (1, hi)):
                s = 2 * j + k
                out[:, 64 * j + 32 * k:64 * j + 32 * k + 32] = \
                    (d * sc[:, s])[:, None] * v - (dmin * mn[:, s])[:, None]
        return out
    if name == "Q6_K":
        ql, qh = raw[:, 0:128].astype(np.int32), raw[:, 128:192].astype(np.int32)
        sc = raw[:, 192:208].copy().view(np.int8).astype(F32)
        d = _f16(raw, 208)
        out = np.empty((n, 256), F32)
        for half in range(2):
            L, H, S = ql[:, 64 * half:], qh[:, 32 * half:], sc[:, 8 * half:]
            for l in range(32):
                i = l // 16
                q = [((L[:, l] & 15) | ((H[:, l] & 3) << 4)) - 32,
                     ((L[:, l + 32] & 15) | (((H[:, l] >> 2) & 3) << 4)) - 32,
                     ((L[:, l] >> 4) | (((H[:, l] >> 4) & 3) << 4)) - 32,
                     ((L[:, l + 32] >> 4) | (((H[:, l] >> 6) & 3) << 4)) - 32]
                for k in range(4):
                    out[:, 128 * half + l + 32 * k] = d * S[:, i + 2 * k] * q[k]
        return out
    raise NotImplementedError("mlb.py: no dequantizer for %s yet" % name)


class Model:
    def __init__(self, path):
        self.buf = open(path, "rb").read()
        b = self.buf
        assert b[:4] == b"MLB1" and struct.unpack_from("<I", b, 4)[0] == 1, "not an .mlb v1"
        h = {}
        for name, off, kind in FIELDS:
            h[name] = struct.unpack_from("<" + kind, b, off)[0]
        self.h = h
        self.head_dim = h["head_dim"] or h["dim"] // h["n_heads"]
        self.q_dim = self.head_dim * h["n_heads"]
        self.kv_dim = self.head_dim * h["n_kv_heads"]
        self.rot_dim = h["rot_dim"] or self.head_dim
        K, V, dk, dv = h["lin_k_heads"], h["lin_v_heads"], h["lin_k_dim"], h["lin_v_dim"]
        self.lin_qkv, self.lin_vd = 2 * K * dk + V * dv, V * dv
        self.pos = 256
        n = h["n_layers"]
        self.flags = list(b[256:256 + n]) if h["layer_flags"] else [0] * n
        if h["layer_flags"]:
            self.pos += n
        self.types = None  # the type table's codes, in matrix order
        if h["wtype"] == 3:
            assert h["q8_mask"] == 0, "q8_mask with a type table"
            self._align()
            self.types = list(b[self.pos:self.pos + matrix_count(h, self.flags)])
            self.pos += len(self.types)
            self.next_type = 0
        self.t = {}
        self._read_body()

    # -- body, in the order of the spec's listing --------------------------
    def _align(self):
        self.pos = (self.pos + 63) // 64 * 64

    def _vec(self, name, n):
        self._align()
        self.t[name] = np.frombuffer(self.buf, "<f4", n, self.pos).astype(F32)
        self.pos += 4 * n

    def _mat(self, name, rows, cols, cls, force_q8=False):
        h = self.h
        q8 = force_q8 or h["wtype"] == 1 or (h["q8_mask"] & cls) != 0
        if self.types is not None:
            code = self.types[self.next_type]
            self.next_type += 1
            assert code in TYPES, "%s: type code %d is no matrix type" % (name, code)
            if code == 0:
                self._vec(name, rows * cols)
                self.t[name] = self.t[name].reshape(rows, cols)
                return
            if code > 2:
                self._blocks(name, rows, cols, code)
                return
            q8 = code == 1
        self._align()
        n = rows * cols
        if q8:
            q = np.frombuffer(self.buf, np.int8, n, self.pos).astype(F32)
            self.pos += n
        else:
            raw = np.frombuffer(self.buf, np.uint8, n // 2, self.pos).reshape(-1, 16)
            self.pos += n // 2
            q = np.concatenate([(raw & 15), (raw >> 4)], axis=1).astype(F32) - 8
        self._align()
        nb = n // 32
        if h["scale_f16"]:
            d = np.frombuffer(self.buf, "<f2", nb, self.pos).astype(F32)
            self.pos += 2 * nb
        else:
            d = np.frombuffer(self.buf, "<f4", nb, self.pos).astype(F32)
            self.pos += 4 * nb
        w = (q.reshape(nb, 32) * d[:, None]).reshape(rows, cols)
        self.t[name] = w.astype(F32)

    def _blocks(self, name, rows, cols, code):
        """ggml blocks, byte for byte as in a GGUF: one array, rows consecutive."""
        tname, elems, nbytes = TYPES[code]
        assert cols % elems == 0, "%s: %d columns are not whole %s blocks" % (name, cols, tname)
        self._align()
        nb = rows * cols // elems
        raw = np.frombuffer(self.buf, np.uint8, nb * nbytes, self.pos).reshape(nb, nbytes)
        self.pos += nb * nbytes
        try:
            self.t[name] = dequant_blocks(code, raw).reshape(rows, cols).astype(F32)
        except NotImplementedError:
            self.t[name] = None  # laid out, not decoded

    def _read_body(self):
        h = self.h
        dim, hid, vocab = h["dim"], h["hidden_dim"], h["vocab"]
        self._mat("tok_emb", vocab, dim, 1 | 2 if h["shared_classifier"] else 1)
        for i in range(h["n_layers"]):
            p = "blk.%d." % i
            self._vec(p + "attn_norm", dim)
            if self.flags[i] & 8:
                V = h["lin_v_heads"]
                self._mat(p + "lqkv", self.lin_qkv, dim, 4)
                self._mat(p + "lz", self.lin_vd, dim, 8)
                self._mat(p + "lb", V, dim, 0, True)
                self._mat(p + "la", V, dim, 0, True)
                self._vec(p + "lconv", self.lin_qkv * h["lin_conv"])
                self._vec(p + "dt_bias", V)
                self._vec(p + "A_log", V)
                self._vec(p + "lnorm", h["lin_v_dim"])
                self._mat(p + "lout", dim, self.lin_vd, 16)
            else:
                self._mat(p + "wq", self.q_dim, dim, 4)
                self._mat(p + "wk", self.kv_dim, dim, 4)
                self._mat(p + "wv", self.kv_dim, dim, 8)
                self._mat(p + "wo", dim, self.q_dim, 16)
                if h["attn_gate"]:
                    self._mat(p + "wg", self.q_dim, dim, 4)
                if h["qkv_bias"]:
                    self._vec(p + "bq", self.q_dim)
                    self._vec(p + "bk", self.kv_dim)
                    self._vec(p + "bv", self.kv_dim)
                if h["qk_norm"]:
                    self._vec(p + "q_norm", self.head_dim)
                    self._vec(p + "k_norm", self.head_dim)
            self._vec(p + "ffn_norm", dim)
            self._mat(p + "w1", hid, dim, 32)
            self._mat(p + "w2", dim, hid, 64)
            self._mat(p + "w3", hid, dim, 32)
            if h["post_norms"]:
                self._vec(p + "post_attn_norm", dim)
                self._vec(p + "post_ffn_norm", dim)
        self._vec("final_norm", dim)
        if not h["shared_classifier"]:
            self._mat("wcls", vocab, dim, 2)

    # -- math ------------------------------------------------------------
    def inv_freq(self, local):
        h, R = self.h, self.rot_dim
        base = h["rope_local_theta"] if local else h["rope_theta"]
        i = np.arange(R // 2, dtype=np.float64)
        inv = base ** (-2 * i / R)
        rt = 0 if local else h["rope_type"]
        f = h["rope_factor"]
        if rt == 1:
            lo, hi, orig = h["rope_low_freq_factor"], h["rope_high_freq_factor"], h["rope_orig_max_seq"]
            wl = 2 * math.pi / inv
            s = (orig / wl - lo) / (hi - lo)
            inv = np.where(wl < orig / hi, inv, np.where(wl > orig / lo, inv / f,
                                                          (1 - s) * inv / f + s * inv))
        elif rt == 2:
            inv = inv / f
        elif rt == 3:
            orig, theta = h["rope_orig_max_seq"], h["rope_theta"]
            d = lambda r: R * math.log(orig / (2 * math.pi * r)) / (2 * math.log(theta))
            lo = max(math.floor(d(h["rope_low_freq_factor"])), 0)
            hi = min(math.ceil(d(h["rope_high_freq_factor"])), R - 1)
            if hi == lo:
                hi += 0.001
            ramp = np.clip((i - lo) / (hi - lo), 0, 1)
            inv = inv / f * ramp + inv * (1 - ramp)
        return inv.astype(F32)


def q8_act(x):
    """The spec's Q8_0 rule in float32, per block of 32; returns the
    dequantized values q*d, which is what the product sees."""
    x = x.astype(F32).reshape(-1, 32)
    amax = np.abs(x).max(axis=1)
    out = np.zeros_like(x)
    ok = amax >= F32(1e-30)
    a = amax[ok][:, None]
    d = (a / F32(127)).astype(F32)
    scale = (F32(127) / a).astype(F32)
    xs = x[ok]
    q = np.trunc((xs * scale).astype(F32) + np.copysign(F32(0.5), xs)).astype(F32)
    q = np.clip(q, -127, 127)
    out[ok] = q * d
    return out.reshape(-1)


def matvec(w, x):
    return (w.astype(np.float64) @ q8_act(x).astype(np.float64)).astype(F32)


def rmsnorm(x, w, eps):
    x64 = x.astype(np.float64)
    inv = F32(1.0 / math.sqrt(float((x64 * x64).mean()) + eps))
    return (x * inv * w).astype(F32)


def forward(m, ids, im=None):
    """Logits for every id; with im (a dict), adds the squared matrix inputs
    to im[(layer, slot)] (slot 0 wq/wk/wv, 1 wo, 2 w1/w3, 3 w2; layer -1
    slot 4 the classifier)."""
    h = m.h

    def rec(l, slot, v):
        if im is not None:
            v = v.astype(np.float64)
            if (l, slot) in im:
                im[(l, slot)] = im[(l, slot)] + v * v
            else:
                im[(l, slot)] = v * v
    dim, hd, eps = h["dim"], m.head_dim, h["norm_eps"]
    nh, nkv = h["n_heads"], h["n_kv_heads"]
    scale = h["attn_scale"] or 1 / math.sqrt(hd)
    es = h["embed_scale"] or 1.0
    glob, loc = m.inv_freq(False), (m.inv_freq(True) if h["rope_local_theta"] else None)
    K, V, dk, dv, taps = (h["lin_k_heads"], h["lin_v_heads"], h["lin_k_dim"], h["lin_v_dim"],
                          h["lin_conv"])
    S = [np.zeros((V, dk, dv), np.float64) for _ in range(h["n_layers"])]
    hist = [np.zeros((max(taps - 1, 0), m.lin_qkv), F32) for _ in range(h["n_layers"])]
    kc = [[] for _ in range(h["n_layers"])]
    vc = [[] for _ in range(h["n_layers"])]
    out = []
    act = (lambda a: a / (1 + np.exp(-a))) if h["act"] == 0 else \
        (lambda a: 0.5 * a * (1 + np.tanh(0.7978845608028654 * (a + 0.044715 * a ** 3))))
    for p, tok in enumerate(ids):
        x = (m.t["tok_emb"][tok] * F32(es)).astype(F32)
        for l in range(h["n_layers"]):
            P, fl = "blk.%d." % l, m.flags[l]
            xb = rmsnorm(x, m.t[P + "attn_norm"], eps)
            rec(l, 0, xb)
            if fl & 8:  # the gated delta rule, the spec's five steps
                qkv = matvec(m.t[P + "lqkv"], xb)
                z = matvec(m.t[P + "lz"], xb)
                b, a = matvec(m.t[P + "lb"], xb), matvec(m.t[P + "la"], xb)
                w = m.t[P + "lconv"].reshape(m.lin_qkv, taps)
                win = np.concatenate([hist[l], qkv[None, :]], axis=0)  # oldest first
                conv = (w.T.astype(np.float64) * win).sum(axis=0)
                hist[l] = win[1:]
                u = conv / (1 + np.exp(-conv))
                qs = u[:K * dk].reshape(K, dk)
                ks = u[K * dk:2 * K * dk].reshape(K, dk)
                vs = u[2 * K * dk:].reshape(V, dv)
                qs = qs / np.sqrt((qs * qs).sum(axis=1, keepdims=True) + 1e-6) / math.sqrt(dk)
                ks = ks / np.sqrt((ks * ks).sum(axis=1, keepdims=True) + 1e-6)
                beta = 1 / (1 + np.exp(-b.astype(np.float64)))
                sp = np.log1p(np.exp(a.astype(np.float64) + m.t[P + "dt_bias"]))
                g = -np.exp(m.t[P + "A_log"].astype(np.float64)) * sp
                o = np.zeros((V, dv))
                for vh in range(V):
                    kh = vh // (V // K)
                    St = S[l][vh] * math.exp(g[vh])
                    delta = beta[vh] * (vs[vh] - St.T @ ks[kh])
                    St = St + np.outer(ks[kh], delta)
                    S[l][vh] = St
                    oh = (St.T @ qs[kh]).astype(F32)
                    oh = rmsnorm(oh, m.t[P + "lnorm"], eps)
                    zz = z[vh * dv:(vh + 1) * dv].astype(np.float64)
                    o[vh] = oh * (zz / (1 + np.exp(-zz)))
                rec(l, 1, o.reshape(-1).astype(F32))
                out_l = matvec(m.t[P + "lout"], o.reshape(-1).astype(F32))
                if h["post_norms"]:
                    out_l = rmsnorm(out_l, m.t[P + "post_attn_norm"], eps)
                x = (x + out_l).astype(F32)
                xb = rmsnorm(x, m.t[P + "ffn_norm"], eps)
                rec(l, 2, xb)
                hb = act(matvec(m.t[P + "w1"], xb)) * matvec(m.t[P + "w3"], xb)
                rec(l, 3, hb.astype(F32))
                o2 = matvec(m.t[P + "w2"], hb.astype(F32))
                if h["post_norms"]:
                    o2 = rmsnorm(o2, m.t[P + "post_ffn_norm"], eps)
                x = (x + o2).astype(F32)
                continue
            q, k, v = matvec(m.t[P + "wq"], xb), matvec(m.t[P + "wk"], xb), matvec(m.t[P + "wv"], xb)
            if h["qkv_bias"]:
                q, k, v = q + m.t[P + "bq"], k + m.t[P + "bk"], v + m.t[P + "bv"]
            q, k = q.reshape(nh, hd).copy(), k.reshape(nkv, hd).copy()
            if h["qk_norm"]:
                q = np.stack([rmsnorm(r, m.t[P + "q_norm"], eps) for r in q])
                k = np.stack([rmsnorm(r, m.t[P + "k_norm"], eps) for r in k])
            if not fl & 4:
                inv, mul = (loc, 1.0) if fl & 2 else \
                    (glob, h["rope_attn_factor"] if h["rope_type"] == 3 else 1.0)
                ang = p * inv.astype(np.float64)
                c, s = np.cos(ang) * mul, np.sin(ang) * mul
                for arr in (q, k):
                    x0, x1 = arr[:, 0:m.rot_dim:2].copy(), arr[:, 1:m.rot_dim:2].copy()
                    arr[:, 0:m.rot_dim:2] = x0 * c - x1 * s
                    arr[:, 1:m.rot_dim:2] = x0 * s + x1 * c
            kc[l].append(k)
            vc[l].append(v.reshape(nkv, hd))
            sliding = (fl & 1) if h["layer_flags"] else h["sliding_window"]
            lo = max(0, p + 1 - h["sliding_window"]) if sliding else 0
            Kc, Vc = np.stack(kc[l][lo:p + 1]), np.stack(vc[l][lo:p + 1])
            ao = np.zeros((nh, hd), np.float64)
            for head in range(nh):
                g = head // (nh // nkv)
                sc = (Kc[:, g, :].astype(np.float64) @ q[head]) * scale
                if h["attn_softcap"]:
                    sc = h["attn_softcap"] * np.tanh(sc / h["attn_softcap"])
                e = np.exp(sc - sc.max())
                ao[head] = (e / e.sum()) @ Vc[:, g, :]
            ao = ao.reshape(-1).astype(F32)
            if h["attn_gate"]:
                gate = matvec(m.t[P + "wg"], xb)
                ao = (ao * (1 / (1 + np.exp(-gate)))).astype(F32)
            rec(l, 1, ao)
            o = matvec(m.t[P + "wo"], ao)
            if h["post_norms"]:
                o = rmsnorm(o, m.t[P + "post_attn_norm"], eps)
            x = (x + o).astype(F32)
            xb = rmsnorm(x, m.t[P + "ffn_norm"], eps)
            rec(l, 2, xb)
            hb = act(matvec(m.t[P + "w1"], xb)) * matvec(m.t[P + "w3"], xb)
            rec(l, 3, hb.astype(F32))
            o = matvec(m.t[P + "w2"], hb.astype(F32))
            if h["post_norms"]:
                o = rmsnorm(o, m.t[P + "post_ffn_norm"], eps)
            x = (x + o).astype(F32)
        xf = rmsnorm(x, m.t["final_norm"], eps)
        rec(-1, 4, xf)
        logits = matvec(m.t["wcls" if "wcls" in m.t else "tok_emb"], xf)
        if h["final_softcap"]:
            logits = (h["final_softcap"] * np.tanh(logits / h["final_softcap"])).astype(F32)
        out.append(logits)
    return np.stack(out)


def imatrix_bytes(m, ids):
    """The .mli file of evaluating ids with logits for every position."""
    h, im = m.h, {}
    forward(m, ids, im)
    q_dim = h["n_heads"] * m.head_dim
    sizes = [h["dim"], q_dim, h["dim"], h["hidden_dim"]]
    parts = []
    for l in range(h["n_layers"]):
        for slot, n in enumerate(sizes):
            v = np.zeros(n)
            got = im.get((l, slot))
            if got is not None:
                v[:len(got)] = got
            parts.append(v)
    parts.append(im[(-1, 4)])
    head = b"MLI1" + struct.pack("<5I2Q", 1, h["n_layers"], h["dim"], h["hidden_dim"],
                                 0 if q_dim == h["dim"] else q_dim, len(ids), len(ids))
    return head + np.concatenate(parts).astype("<f8").tobytes()


def main(argv):
    if len(argv) < 3 or argv[1] not in ("info", "logits", "imatrix"):
        sys.exit(__doc__)
    m = Model(argv[2])
    if argv[1] == "info":
        for k, v in m.h.items():
            print(k, v)
        print("tensors", len(m.t), "end", m.pos)
        return
    ids = [int(a) for a in argv[3:]]
    if argv[1] == "imatrix":
        sys.stdout.buffer.write(imatrix_bytes(m, ids))
        return
    sys.stdout.buffer.write(forward(m, ids).astype("<f4").tobytes())


if __name__ == "__main__":
    main(sys.argv)
