"""Session 50's ported kernels (tests/support/ported_hpc3.py, ported_hpc3_more.py, ported_hpc3_special.py): every
kernel's small random inputs, away from kinks, and its NumPy reference. Used by tests/library/test_ported_hpc3.py.

`cases(rng)` gives (name, kernel or program, annotated args, dim, check_grad options, reference); a reference
takes the arguments' primal values before the launch and returns {argument position: expected value after}."""

import math

import numpy as np

import gradkern as gk
from support import ported_hpc3 as A
from support import ported_hpc3_more as B
from support import ported_hpc3_special as S


def _gelu(v):
    out, x, n = v
    out = out.copy()
    out[:n] = 0.5 * x[:n] * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x[:n] + 0.044715 * x[:n] ** 3)))
    return {0: out}


def _rmsnorm(v):
    _, x, w, size = v
    ss = 1.0 / np.sqrt((x ** 2).sum(axis=1, keepdims=True) / size + 1e-5)
    return {0: w * (ss * x)}


def _log_softmax(v):
    x = v[1]
    m = x.max(axis=1, keepdims=True)
    return {0: x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))}


def _fused_classifier(v):
    logits, _, dlosses, targets, _ = v
    m = logits.max(axis=1, keepdims=True)
    s = np.exp(logits - m).sum(axis=1, keepdims=True)
    rows = np.arange(logits.shape[0])
    losses = -(logits[rows, targets] - m[:, 0]) + np.log(s[:, 0])
    onehot = np.zeros_like(logits)
    onehot[rows, targets] = 1.0
    return {0: (np.exp(logits - m) / s - onehot) * dlosses[:, None], 1: losses}


def _attention(v):
    out, preatt, att, inp, c, nh = v
    bsz, t_len, _ = inp.shape
    hs = c // nh
    q = inp[:, :, :c].reshape(bsz, t_len, nh, hs).transpose(0, 2, 1, 3)
    k = inp[:, :, c:2 * c].reshape(bsz, t_len, nh, hs).transpose(0, 2, 1, 3)
    val = inp[:, :, 2 * c:].reshape(bsz, t_len, nh, hs).transpose(0, 2, 1, 3)
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hs)
    causal = np.tril(np.ones((t_len, t_len), bool))
    pre = np.where(causal, scores, preatt)
    masked = np.where(causal, scores, -np.inf)
    e = np.exp(masked - masked.max(axis=3, keepdims=True))
    a = e / e.sum(axis=3, keepdims=True)
    o = (a @ val).transpose(0, 2, 1, 3).reshape(bsz, t_len, c)
    return {0: o, 1: pre, 2: a}


def _conv2d(v):
    inp, w, bias, out, _, stride, pad, dil = v
    nb, cin, hgt, wid = inp.shape
    cout, _, kh, kw = w.shape
    padded = np.zeros((nb, cin, hgt + 2 * pad, wid + 2 * pad))
    padded[:, :, pad:pad + hgt, pad:pad + wid] = inp
    res = np.empty_like(out)
    for y in range(out.shape[2]):
        for x in range(out.shape[3]):
            patch = padded[:, :, y * stride:y * stride + dil * (kh - 1) + 1:dil,
                           x * stride:x * stride + dil * (kw - 1) + 1:dil]
            res[:, :, y, x] = np.einsum("ncpq,ocpq->no", patch, w) + bias
    return {3: res}


def _pool_windows(v, k, stride, pad):
    """(n, c, ph, pw, rows, cols) of each pooled output in flat order: the window clipped to the image."""
    nb, ch, hgt, wid = v
    ph_n, pw_n = (hgt + 2 * pad - k) // stride + 1, (wid + 2 * pad - k) // stride + 1
    for n in range(nb):
        for c in range(ch):
            for ph in range(ph_n):
                for pw in range(pw_n):
                    h0, w0 = ph * stride - pad, pw * stride - pad
                    yield n, c, h0, w0, slice(max(h0, 0), min(h0 + k, hgt)), slice(max(w0, 0), min(w0 + k, wid))


def _max_pool(v):
    bottom, top, indices, ch, hgt, wid, _, _, k, stride, pad, _ = v
    img = bottom.reshape(-1, ch, hgt, wid)
    top, indices = top.copy(), indices.copy()
    for flat, (n, c, _, _, rows, cols) in enumerate(_pool_windows(img.shape, k, stride, pad)):
        win = img[n, c, rows, cols]
        r, q = np.unravel_index(np.argmax(win), win.shape)
        top[flat] = win[r, q]
        indices[flat] = (rows.start + r) * wid + cols.start + q
    return {1: top, 2: indices}


def _avg_pool(v):
    bottom, top, _, hgt, wid, _, _, k, stride, pad, include = v
    top = top.copy()
    for flat, (n, c, h0, w0, rows, cols) in enumerate(_pool_windows(bottom.shape, k, stride, pad)):
        size = (min(h0 + k, hgt + pad) - h0) * (min(w0 + k, wid + pad) - w0)
        win = bottom[n, c, rows, cols]
        top[flat] = win.sum() / (size if include else win.size)
    return {1: top}


def _im2col(v):
    im, col, hgt, wid, kh, kw, pad, stride, dil, hc, wc = v
    ch = im.size // (hgt * wid)
    padded = np.zeros((ch, hgt + 2 * pad, wid + 2 * pad))
    padded[:, pad:pad + hgt, pad:pad + wid] = im.reshape(ch, hgt, wid)
    res = np.empty((ch, kh, kw, hc, wc))
    for i in range(kh):
        for j in range(kw):
            res[:, i, j] = padded[:, i * dil:i * dil + stride * (hc - 1) + 1:stride,
                                  j * dil:j * dil + stride * (wc - 1) + 1:stride]
    return {1: res.ravel()}


def _upsample(v):
    idata, odata, rh, rw, _ = v
    h1, w1 = idata.shape[2:]

    def axis(scale, size_out, size_in):
        src = np.maximum(scale * (np.arange(size_out) + 0.5) - 0.5, 0.0)
        lo = src.astype(int)
        return lo, np.minimum(lo + 1, size_in - 1), src - lo
    hl, hh, lh = axis(rh, odata.shape[2], h1)
    wl, wh, lw = axis(rw, odata.shape[3], w1)
    g = idata[:, :, hl][:, :, :, wl], idata[:, :, hl][:, :, :, wh], idata[:, :, hh][:, :, :, wl], \
        idata[:, :, hh][:, :, :, wh]
    lh, lw = lh[:, None], lw[None, :]
    return {1: (1 - lh) * ((1 - lw) * g[0] + lw * g[1]) + lh * ((1 - lw) * g[2] + lw * g[3])}


def _grid_sample(v):
    inp, grid, out = v
    _, _, hgt, wid = inp.shape
    padded = np.zeros(inp.shape[:2] + (hgt + 2, wid + 2))
    padded[:, :, 1:-1, 1:-1] = inp
    ix = ((grid[..., 0] + 1) * wid - 1) / 2
    iy = ((grid[..., 1] + 1) * hgt - 1) / 2
    x0, y0 = np.floor(ix), np.floor(iy)
    fx, fy = ix - x0, iy - y0
    res = np.zeros_like(out)
    for n in range(inp.shape[0]):
        for dy, dx, wt in ((0, 0, (1 - fx) * (1 - fy)), (0, 1, fx * (1 - fy)), (1, 0, (1 - fx) * fy),
                           (1, 1, fx * fy)):
            yy = np.clip(y0[n].astype(int) + dy + 1, 0, hgt + 1)  # out-of-range corners read the zero frame
            xx = np.clip(x0[n].astype(int) + dx + 1, 0, wid + 1)
            res[n] += padded[n][:, yy, xx] * wt[n]
    return {2: res}


def _adamw(v):
    p, g, m, s, n, lr, b1, b2, c1, c2, eps, wd = v
    m = b1 * m + (1 - b1) * g
    s = b2 * s + (1 - b2) * g * g
    return {0: p - lr * ((m / c1) / (np.sqrt(s / c2) + eps) + wd * p), 2: m, 3: s}


def _batch_norm(v):
    x, _, w, b, rm, rv, _, _, mom, eps = v
    mean = x.mean(axis=(0, 2, 3))
    var = x.var(axis=(0, 2, 3))
    invstd = 1 / np.sqrt(var + eps)
    cnt = x.size // x.shape[1]
    shape = (1, -1, 1, 1)
    y = (x - mean.reshape(shape)) * invstd.reshape(shape) * w.reshape(shape) + b.reshape(shape)
    return {1: y, 4: mom * mean + (1 - mom) * rm, 5: mom * var * cnt / (cnt - 1) + (1 - mom) * rv, 6: mean,
            7: invstd}


def _hex_mesh(rng):
    """Two hexahedra side by side (12 nodes, LULESH's corner order), corners moved by up to 0.1."""
    base = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0], [0, 0, 1], [1, 0, 1], [1, 1, 1], [0, 1, 1]], float)
    nodes = {}
    nodelist = np.zeros((2, 8), np.int32)
    for e in range(2):
        for k, corner in enumerate(base + [e, 0, 0]):
            nodelist[e, k] = nodes.setdefault(tuple(corner), len(nodes))
    xyz = np.array(list(nodes)) + rng.uniform(-0.1, 0.1, (len(nodes), 3))
    return xyz, nodelist


def _lattice(rng, n, spacing=1.0, jitter=0.1):
    """n positions on a perturbed cubic lattice: pair distances bounded away from 0."""
    grid = np.array([[i, j, k] for i in range(2) for j in range(2) for k in range(2)], float)[:n]
    return grid * spacing + rng.uniform(-jitter, jitter, (n, 3))


def _p1_mesh(rng):
    """A 2 x 2 square mesh of 8 counter-clockwise triangles, interior node moved."""
    coords = np.array([[i, j] for j in range(3) for i in range(3)], float)
    coords += rng.uniform(-0.15, 0.15, coords.shape)
    tris = []
    for j in range(2):
        for i in range(2):
            n0 = 3 * j + i
            tris += [(n0, n0 + 1, n0 + 4), (n0, n0 + 4, n0 + 3)]
    return coords, np.array(tris, np.int32)


def cases(rng, dtype=np.float64):
    """(name, kernel or program, args, dim, check_grad options, reference) on small random inputs away from
    kinks."""
    from support import ported_hpc3_refs as ref

    def R(*s, lo=0.5, hi=1.5):
        return rng.uniform(lo, hi, s).astype(dtype)

    def D(a):
        return gk.Duplicated(a, np.zeros_like(a))

    def C(a):
        return gk.Const(a)

    act = gk.Active
    xyz, nodelist = _hex_mesh(rng)
    pos6 = _lattice(rng, 6)
    rows, full = 6, np.array([[j for j in range(6) if j != i] for i in range(6)], np.int32)
    half = -np.ones(6 * 5, np.int32)
    numneigh = np.zeros(6, np.int32)
    for i in range(6):
        numneigh[i] = 5 - i
        half[i * 5:i * 5 + 5 - i] = np.arange(i + 1, 6)
    coords, tris = _p1_mesh(rng)
    erf_x = np.concatenate((R(6, lo=-0.95, hi=0.95), [0.9995, -0.9991]))
    return [
        ("gelu_tanh", A.gelu_tanh, (D(R(8)), D(R(8, lo=-3.0, hi=3.0)), 7), 8, {}, _gelu),
        ("rmsnorm_rows", A.rmsnorm_rows, (D(R(3, 5)), D(R(3, 5, lo=-1.0, hi=1.0)), D(R(5)), 5), 3, {}, _rmsnorm),
        ("log_softmax_rows", A.log_softmax_rows, (D(R(3, 5)), D(R(3, 5, lo=-2.0, hi=2.0)), 5), 3, {},
         _log_softmax),
        ("fused_classifier", A.fused_classifier, (D(R(3, 5, lo=-2.0, hi=2.0)), D(R(3)), D(R(3)),
                                                  C(np.array([2, 0, 4], np.int32)), 5), 3, {}, _fused_classifier),
        ("attention_forward", A.attention_forward, (D(R(1, 3, 4)), D(R(1, 2, 3, 3)), D(R(1, 2, 3, 3)),
                                                    D(R(1, 3, 12, lo=-1.0, hi=1.0)), 4, 2), (1, 3, 2), {},
         _attention),
        ("conv2d_direct", A.conv2d_direct, (D(R(2, 2, 5, 5)), D(R(3, 2, 3, 3, lo=-1.0, hi=1.0)), D(R(3)),
                                            D(R(2, 3, 3, 3)), 3, 2, 2, 2), (6, 3, 3), {}, _conv2d),
        ("max_pool_nchw", A.max_pool_nchw, (D(R(50)), D(R(18)), C(np.zeros(18, np.int64)), 2, 5, 5, 3, 3, 3, 2, 1,
                                            1), 18, {}, _max_pool),
        ("avg_pool_nchw", A.avg_pool_nchw, (D(R(1, 2, 5, 5)), D(R(18)), 2, 5, 5, 3, 3, 3, 2, 1, 0), 18, {},
         _avg_pool),
        ("im2col", A.im2col, (D(R(2 * 4 * 5)), D(R(2 * 9 * 2 * 3)), 4, 5, 3, 3, 1, 2, 1, 2, 3), 12, {}, _im2col),
        ("upsample_bilinear", A.upsample_bilinear, (D(R(1, 2, 3, 4)), D(R(1, 2, 5, 7)), 3 / 5, 4 / 7, 0), 35, {},
         _upsample),
        ("grid_sample_bilinear", A.grid_sample_bilinear, (D(R(1, 2, 4, 5)), D(R(1, 3, 3, 2, lo=-1.1, hi=1.1)),
                                                          D(R(1, 2, 3, 3))), 9, {}, _grid_sample),
        ("adamw", A.adamw, (D(R(7)), D(R(7, lo=-1.0, hi=1.0)), D(R(7, lo=-0.1, hi=0.1)), D(R(7, lo=0.01, hi=0.1)),
                            7, act(0.01), act(0.9), 0.999, 1 - 0.9 ** 3, 1 - 0.999 ** 3, 1e-8, act(0.01)), 8, {},
         _adamw),
        ("batch_norm_train", A.batch_norm_train, (D(R(2, 3, 2, 2)), D(R(2, 3, 2, 2)), D(R(3)), D(R(3)), D(R(3)),
                                                  D(R(3)), D(R(3)), D(R(3)), act(0.1), 1e-5), 3, {}, _batch_norm),
        ("lulesh_hourglass", B.lulesh_hourglass, (D(R(2, lo=1.0, hi=2.0)), *[D(R(2, 8, lo=-1.0, hi=1.0))
                                                                             for _ in range(6)],
                                                  D(R(2)), D(R(2)), C(nodelist.ravel()),
                                                  *[D(R(12, lo=-1.0, hi=1.0)) for _ in range(3)], act(3.0),
                                                  *[D(R(2, 8)) for _ in range(3)]), 2, {}, ref.lulesh_hourglass),
        ("lulesh_char_length", B.lulesh_char_length, (*[D(xyz[:, d].copy()) for d in range(3)],
                                                      *[D(R(12, lo=-1.0, hi=1.0)) for _ in range(3)], C(nodelist),
                                                      D(R(2)), act(0.05), D(R(2))), 2, {}, ref.lulesh_char_length),
        ("eam_density", B.eam_density, (D(pos6), C(full), C(np.full(6, 5, np.int32)), D(R(24)), D(R(24)),
                                        D(R(24)), 0.5, 10.0, 0.0, 2.0, 20, 4.0, D(R(6)), D(R(6)), D(R(6))), 6, {},
         ref.eam_density),
        ("eam_force", B.eam_force, (D(pos6), C(full), C(np.full(6, 5, np.int32)), D(R(24)), D(R(24)), D(R(6)), 0.5,
                                    10.0, 20, 4.0, D(R(6, 3))), 6, {}, ref.eam_force),
        ("minimd_lj_half", B.minimd_lj_half, (D(_lattice(rng, rows, 1.1).ravel()), D(R(18)), C(half), C(numneigh),
                                              5, 1.5 ** 2, act(1.0), act(0.8)), rows, {}, ref.minimd_lj_half),
        ("sph_density", B.sph_density, (D(R(6, 3, lo=0.0, hi=1.0)), D(R(6)), act(0.9), D(R(6)), 6), 6, {},
         ref.sph_density),
        ("sph_pressure_force", B.sph_pressure_force, (D(R(6, 3, lo=0.0, hi=1.0)), D(R(6)), D(R(6)), D(R(6)),
                                                      act(0.9), D(R(6, 3)), 6), 6, {}, ref.sph_pressure_force),
        ("kokkos_yax", B.kokkos_yax, (D(R(4)), D(R(4, 3)), D(R(3)), D(R(1)), 3), 4, {}, ref.kokkos_yax),
        ("matrix_mul_tiled", B.matrix_mul_tiled, (D(R(24)), D(R(16)), D(R(24)), 4, 6), (4, 6), {},
         ref.matrix_mul_tiled),
        ("numba_cpu_gpu_compat", B.numba_cpu_gpu_compat, (D(R(7)), D(R(7)), D(R(7)), D(R(7))), 8, {},
         ref.numba_cpu_gpu_compat),
        ("solve_heat_equation", B.solve_heat_equation, (D(R(8)), D(R(8)), 3, 0.2), None, {},
         ref.solve_heat_equation),
        ("nek_local_grad3", B.nek_local_grad3, (D(R(2, 3, 3, 3)), D(R(2, 3, 3, 3)), D(R(2, 3, 3, 3)),
                                                D(R(2, 3, 3, 3)), D(R(3, 3, lo=-1.0, hi=1.0))), (2, 3, 3), {},
         ref.nek_local_grad3),
        ("hll_swe_flux", B.hll_swe_flux, (D(R(9)), D(R(9) * R(9, lo=-6.0, hi=6.0)), D(R(8)), D(R(8)), act(9.81)),
         8, {}, ref.hll_swe_flux),
        ("fem_p1_apply", S.fem_p1_apply, (D(coords), C(tris), D(R(9)), D(R(9))), 8, {}, ref.fem_p1_apply),
        ("erfinv", S.erfinv_kernel, (D(erf_x.astype(dtype)), D(R(9)), 8), 9, {}, ref.erfinv_kernel),
        ("haccmk_step10", S.haccmk_step10, (*[D(R(6, lo=0.0, hi=1.0)) for _ in range(3)], D(R(6)),
                                            *[D(R(6)) for _ in range(3)], 1.2, 0.1, act(0.5), 6), 6, {},
         ref.haccmk_step10),
        ("chebev", S.chebev, (D(R(6, lo=-1.0, hi=1.0)), D(R(5, lo=-0.9, hi=1.9)), D(R(5)), 6, act(-1.0), act(2.0)),
         5, {}, ref.chebev),
        ("dwt97_rows", S.dwt97_rows, (D(R(3, 8)), D(R(3, 8)), 8), 3, {}, ref.dwt97_rows),
        ("lud_base", S.lud_base, (D((R(4, 4) + 4 * np.eye(4)).ravel()), 4), 1, {}, ref.lud_base),
    ]
