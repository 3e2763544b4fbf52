"""Session 52's fifth round of ported kernels, part three: graph, neural-network and image kernels (PageRank
pulled over CSR, GCN aggregation with edge weights, GAT's segment softmax over neighbours, RoPE, a depthwise
convolution, embedding-bag with per-sample weights, group norm, cross-entropy with its label gather, a bilateral
filter, a total-variation denoising step, the Sobel magnitude). Written here from the algorithms of the files
cited; used by tests/library/test_ported_hpc5.py."""

import math

import gradkern as gk

# ---- PageRank, pull form (Gunrock / the GAP benchmark suite's pr.cc: PageRankPull): a thread per vertex sums the
# contributions of its in-neighbours over a CSR row, each divided by that neighbour's out-degree ---------------


@gk.kernel
def pagerank_pull(row_ptr, col, out_degree, rank, new_rank, damping):
    v = gk.tid()
    n = rank.shape[0]
    s = 0.0
    for e in range(row_ptr[v], row_ptr[v + 1]):
        u = col[e]
        s += rank[u] / out_degree[u]
    new_rank[v] = (1.0 - damping) / n + damping * s


# ---- GCN aggregation (PyTorch Geometric's GCNConv propagate / DGL's SpMM with edge weights, as the CUDA csrmm
# kernels write it): a thread per (vertex, feature), the weighted sum of the neighbours' features scaled by the
# symmetric normalisation deg^-1/2 on both ends --------------------------------------------------------------


@gk.kernel
def gcn_aggregate(row_ptr, col, edge_w, deg, h, out):
    v, f = gk.tid()
    s = 0.0
    for e in range(row_ptr[v], row_ptr[v + 1]):
        u = col[e]
        s += edge_w[e] * h[u, f] / math.sqrt(deg[u])
    out[v, f] = s / math.sqrt(deg[v])


# ---- GAT attention (PyTorch Geometric's GATConv / DGL's edge_softmax, as their fused CUDA kernels write it): a
# thread per (vertex, head); scores leaky_relu(a_src[u] + a_dst[v]) over the CSR segment, the segment's max, the
# softmax's denominator, then the attention-weighted sum of the neighbours' features --------------------------


@gk.kernel
def gat_aggregate(row_ptr, col, a_src, a_dst, h, out, slope):
    v, hd = gk.tid()
    nf = h.shape[2]
    m = -float("inf")
    for e in range(row_ptr[v], row_ptr[v + 1]):
        z = a_src[col[e], hd] + a_dst[v, hd]
        z = z if z > 0.0 else slope * z
        m = max(m, z)
    denom = 0.0
    for e in range(row_ptr[v], row_ptr[v + 1]):
        z = a_src[col[e], hd] + a_dst[v, hd]
        z = z if z > 0.0 else slope * z
        denom += math.exp(z - m)
    for f in range(nf):
        out[v, hd, f] = 0.0
    for e in range(row_ptr[v], row_ptr[v + 1]):
        u = col[e]
        z = a_src[u, hd] + a_dst[v, hd]
        z = z if z > 0.0 else slope * z
        alpha = math.exp(z - m) / denom
        for f in range(nf):
            out[v, hd, f] += alpha * h[u, hd, f]


# ---- rotary position embedding (llama2.c run.c: forward, the RoPE loop; the same as llm.c's rope kernels): a
# thread per (position, head, pair), frequency base^(-2i / head_size), q and k rotated in place -----------------


@gk.kernel
def rope_rotate(q, k, head_size, base):
    pos, h, i = gk.tid()
    freq = 1.0 / base ** (2.0 * i / head_size)
    angle = pos * freq
    fcr = math.cos(angle)
    fci = math.sin(angle)
    j = h * head_size + 2 * i
    q0 = q[pos, j]
    q1 = q[pos, j + 1]
    q[pos, j] = q0 * fcr - q1 * fci
    q[pos, j + 1] = q0 * fci + q1 * fcr
    k0 = k[pos, j]
    k1 = k[pos, j + 1]
    k[pos, j] = k0 * fcr - k1 * fci
    k[pos, j + 1] = k0 * fci + k1 * fcr


# ---- depthwise convolution (PyTorch aten/src/ATen/native/cuda/DepthwiseConv2d.cu: conv_depthwise2d_forward_
# kernel): a thread per output element (channel, row, column), the channel's own K x K filter, stride, zero
# padding skipped by bounds tests, the bias added -----------------------------------------------------------------


@gk.kernel
def depthwise_conv2d(inp, weight, bias, out, stride, pad):
    c, oy, ox = gk.tid()
    height = inp.shape[1]
    width = inp.shape[2]
    ksize = weight.shape[1]
    s = bias[c]
    for ky in range(ksize):
        for kx in range(ksize):
            iy = oy * stride - pad + ky
            ix = ox * stride - pad + kx
            if iy >= 0 and iy < height and ix >= 0 and ix < width:
                s += weight[c, ky, kx] * inp[c, iy, ix]
    out[c, oy, ox] = s


# ---- EmbeddingBag, sum mode with per-sample weights (PyTorch aten/src/ATen/native/cuda/EmbeddingBag.cu:
# EmbeddingBag_updateOutputKernel_sum_mean): a thread per (bag, feature), the bag's indices between offsets; the
# gradient scatters into the table, shared between bags -----------------------------------------------------------


@gk.kernel
def embedding_bag_sum(table, indices, offsets, per_sample_weights, out):
    b, f = gk.tid()
    s = 0.0
    for e in range(offsets[b], offsets[b + 1]):
        s += per_sample_weights[e] * table[indices[e], f]
    out[b, f] = s


# ---- GroupNorm (PyTorch aten/src/ATen/native/cuda/group_norm_kernel.cu: RowwiseMomentsCUDAKernel then the
# affine apply, fused per group here): a thread per (sample, group), Welford's mean and variance over the
# group's channels and pixels, then each element normalised with its channel's gamma and beta --------------------


@gk.kernel
def group_norm(x, gamma, beta, y, groups, eps):
    n, g = gk.tid()
    cpg = x.shape[1] // groups
    hw = x.shape[2]
    mean = 0.0
    m2 = 0.0
    count = 0.0
    for c in range(g * cpg, (g + 1) * cpg):
        for p in range(hw):
            count += 1.0
            delta = x[n, c, p] - mean
            mean += delta / count
            m2 += delta * (x[n, c, p] - mean)
    rstd = 1.0 / math.sqrt(m2 / count + eps)
    for c in range(g * cpg, (g + 1) * cpg):
        for p in range(hw):
            y[n, c, p] = (x[n, c, p] - mean) * rstd * gamma[c] + beta[c]


# ---- cross-entropy with a label gather (llm.c train_gpt2.cu: crossentropy_forward_kernel1 after softmax, here
# fused with a max-subtracted log-sum-exp as PyTorch's log_softmax + nll_loss): a thread per row, the target's
# logit read at an index from an int array ---------------------------------------------------------------------


@gk.kernel
def cross_entropy(logits, targets, losses):
    r = gk.tid()
    vocab = logits.shape[1]
    m = logits[r, 0]
    for v in range(1, vocab):
        m = max(m, logits[r, v])
    s = 0.0
    for v in range(vocab):
        s += math.exp(logits[r, v] - m)
    losses[r] = m + math.log(s) - logits[r, targets[r]]


# ---- bilateral filter (CUDA samples Samples/5_Domain_Specific/bilateralFilter/bilateral_kernel.cu:
# d_bilateral_filter): a thread per pixel, a (2r + 1)^2 window clamped at the borders, the spatial Gaussian times
# the range Gaussian exp(-(I_q - I_p)^2 / (2 sigma_r^2)), normalised by the weights' sum -----------------------


@gk.kernel
def bilateral_filter(img, out, radius, sigma_s, sigma_r):
    y, x = gk.tid()
    h = img.shape[0]
    w = img.shape[1]
    center = img[y, x]
    total = 0.0
    wsum = 0.0
    for dy in range(-radius, radius + 1):
        for dx in range(-radius, radius + 1):
            yy = min(max(y + dy, 0), h - 1)
            xx = min(max(x + dx, 0), w - 1)
            v = img[yy, xx]
            wt = math.exp(-(dx * dx + dy * dy) / (2.0 * sigma_s * sigma_s)
                          - (v - center) * (v - center) / (2.0 * sigma_r * sigma_r))
            total += wt * v
            wsum += wt
    out[y, x] = total / wsum


# ---- total-variation denoising by gradient descent (the ROF model; as scikit-image's and the GPU image
# restoration examples' explicit TV step write it): forward differences (zero past the edge), the flux
# grad u / sqrt(eps + |grad u|^2) recomputed at the left and upper neighbours for the backward divergence ----


@gk.func
def tv_flux(u, y, x, h, w, eps):
    gx = u[y, x + 1] - u[y, x] if x < w - 1 else 0.0
    gy = u[y + 1, x] - u[y, x] if y < h - 1 else 0.0
    norm = math.sqrt(eps + gx * gx + gy * gy)
    return gx / norm, gy / norm


@gk.kernel
def tv_step(u, f, un, lam, tau, eps):
    y, x = gk.tid()
    h = u.shape[0]
    w = u.shape[1]
    px, py = tv_flux(u, y, x, h, w, eps)
    div = px + py
    if x > 0:
        qx, qy = tv_flux(u, y, x - 1, h, w, eps)
        div -= qx
    if y > 0:
        rx, ry = tv_flux(u, y - 1, x, h, w, eps)
        div -= ry
    un[y, x] = u[y, x] + tau * (div - lam * (u[y, x] - f[y, x]))


# ---- Sobel edge magnitude (CUDA samples Samples/5_Domain_Specific/SobelFilter/SobelFilter_kernels.cu:
# ComputeSobel on the interior; OpenCV's cv::cuda Sobel + magnitude): the two 3 x 3 masks, sqrt(gx^2 + gy^2) ----


@gk.kernel
def sobel_magnitude(img, mag, scale):
    y, x = gk.tid()
    h = img.shape[0]
    w = img.shape[1]
    if y >= 1 and y < h - 1 and x >= 1 and x < w - 1:
        ul = img[y - 1, x - 1]
        um = img[y - 1, x]
        ur = img[y - 1, x + 1]
        ml = img[y, x - 1]
        mr = img[y, x + 1]
        ll = img[y + 1, x - 1]
        lm = img[y + 1, x]
        lr = img[y + 1, x + 1]
        gx = ur + 2.0 * mr + lr - ul - 2.0 * ml - ll
        gy = ul + 2.0 * um + ur - ll - 2.0 * lm - lr
        mag[y, x] = scale * math.sqrt(gx * gx + gy * gy)
    else:
        mag[y, x] = 0.0
