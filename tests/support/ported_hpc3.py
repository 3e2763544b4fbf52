"""Session 50's third round of kernels ported from public GPU and HPC codes, first part: deep-learning operators
as PyTorch, llm.c, llama2.c and Caffe write them in CUDA/C (activations, normalisations, losses, attention,
convolution, pooling, im2col, resampling, an optimiser step). Each cites the file and function it follows and
was written here from the algorithm, not copied. tests/support/ported_hpc3_more.py has the HPC part,
ported_hpc3_cases.py the inputs and NumPy references; tests/library/test_ported_hpc3.py checks them."""

import math

import gradkern as gk

# ---- llm.c GELU, tanh approximation (karpathy/llm.c dev/cuda/gelu_forward.cu: gelu_forward_kernel1) ----------
GELU_SCALING_FACTOR = math.sqrt(2.0 / math.pi)


@gk.kernel
def gelu_tanh(out, inp, n):
    i = gk.tid()
    if i < n:
        xi = inp[i]
        cube = 0.044715 * xi * xi * xi
        out[i] = 0.5 * xi * (1.0 + math.tanh(GELU_SCALING_FACTOR * (xi + cube)))


# ---- llama2.c rmsnorm (karpathy/llama2.c run.c: rmsnorm(o, x, weight, size)), one row a thread -----------------


@gk.kernel
def rmsnorm_rows(o, x, weight, size):
    row = gk.tid()
    ss = 0.0
    for j in range(size):
        ss += x[row, j] * x[row, j]
    ss /= size
    ss += 1e-5
    ss = 1.0 / math.sqrt(ss)
    for j in range(size):
        o[row, j] = weight[j] * (ss * x[row, j])


# ---- PyTorch log_softmax (aten/src/ATen/native/cuda/SoftMax.cu: cunn_SoftMaxForward with
# LogSoftMaxForwardEpilogue: x - max - log(sum exp(x - max))), one row a thread ---------------------------------


@gk.kernel
def log_softmax_rows(out, inp, dim_size):
    row = gk.tid()
    max_input = inp[row, 0]
    for j in range(1, dim_size):
        max_input = max(max_input, inp[row, j])
    sumexp = 0.0
    for j in range(dim_size):
        sumexp += math.exp(inp[row, j] - max_input)
    logsum = math.log(sumexp)
    for j in range(dim_size):
        out[row, j] = inp[row, j] - max_input - logsum


# ---- llm.c fused classifier (dev/cuda/classifier_fused.cu: fused_classifier_kernel1): the row's softmax, the
# cross-entropy loss of its target, and the loss's gradient written over the logits in place ---------------------


@gk.kernel
def fused_classifier(logits, losses, dlosses, targets, v):
    row = gk.tid()
    ix = targets[row]
    maxval = -10000.0
    for j in range(v):
        if logits[row, j] > maxval:
            maxval = logits[row, j]
    sumval = 0.0
    for j in range(v):
        sumval += math.exp(logits[row, j] - maxval)
    losses[row] = -(logits[row, ix] - maxval) + math.log(sumval)
    dloss = dlosses[row]
    for j in range(v):
        prob = math.exp(logits[row, j] - maxval) / sumval
        indicator = 1.0 if j == ix else 0.0
        logits[row, j] = (prob - indicator) * dloss


# ---- llm.c causal self-attention (train_gpt2.c: attention_forward), one (b, t, h) a thread: query-key dot
# products with the causal mask, softmax with max subtraction, the weighted sum of the values -----------------


@gk.kernel
def attention_forward(out, preatt, att, inp, c, nh):
    b, t, h = gk.tid()
    hs = c // nh
    scale = 1.0 / math.sqrt(hs)
    maxval = -10000.0
    for t2 in range(t + 1):
        val = 0.0
        for i in range(hs):
            val += inp[b, t, h * hs + i] * inp[b, t2, c + h * hs + i]
        val *= scale
        if val > maxval:
            maxval = val
        preatt[b, h, t, t2] = val
    expsum = 0.0
    for t2 in range(t + 1):
        expv = math.exp(preatt[b, h, t, t2] - maxval)
        expsum += expv
        att[b, h, t, t2] = expv
    expsum_inv = 0.0 if expsum == 0.0 else 1.0 / expsum
    for t2 in range(att.shape[3]):
        if t2 <= t:
            att[b, h, t, t2] *= expsum_inv
        else:
            att[b, h, t, t2] = 0.0
    for i in range(hs):
        out[b, t, h * hs + i] = 0.0
    for t2 in range(t + 1):
        for i in range(hs):
            out[b, t, h * hs + i] += att[b, h, t, t2] * inp[b, t2, 2 * c + h * hs + i]


# ---- direct 2-D convolution, NCHW, stride/pad/dilation (BVLC/caffe src/caffe/test/test_convolution_layer.cpp:
# caffe_conv, the reference cuDNN's forward algorithms are tested against) -------------------------------------


@gk.kernel
def conv2d_direct(inp, w, bias, out, cout, stride, pad, dil):
    nco, y, x = gk.tid()
    n = nco // cout
    o = nco % cout
    cin, kh, kw = w.shape[1], w.shape[2], w.shape[3]
    height, width = inp.shape[2], inp.shape[3]
    s = bias[o]
    for c in range(cin):
        for p in range(kh):
            for q in range(kw):
                in_y = y * stride - pad + p * dil
                in_x = x * stride - pad + q * dil
                if in_y >= 0 and in_y < height and in_x >= 0 and in_x < width:
                    s += inp[n, c, in_y, in_x] * w[o, c, p, q]
    out[n, o, y, x] = s


# ---- PyTorch max pooling (aten/src/ATen/native/cuda/DilatedMaxPool2d.cu: max_pool_forward_nchw): flat output
# index decomposed, the window walked with dilation, the argmax kept (NaN wins, as there) ------------------------


@gk.kernel
def max_pool_nchw(bottom, top, indices, channels, height, width, pooled_h, pooled_w, k, stride, pad, dil):
    index = gk.tid()
    pw = index % pooled_w
    ph = (index // pooled_w) % pooled_h
    c = (index // pooled_w // pooled_h) % channels
    n = index // pooled_w // pooled_h // channels
    hstart = ph * stride - pad
    wstart = pw * stride - pad
    hend = min(hstart + (k - 1) * dil + 1, height)
    wend = min(wstart + (k - 1) * dil + 1, width)
    while hstart < 0:
        hstart += dil
    while wstart < 0:
        wstart += dil
    maxval = -math.inf
    maxidx = hstart * width + wstart
    for h in range(hstart, hend, dil):
        for w in range(wstart, wend, dil):
            val = bottom[((n * channels + c) * height + h) * width + w]
            if val > maxval or val != val:
                maxidx = h * width + w
                maxval = val
    top[index] = maxval
    indices[index] = maxidx


# ---- PyTorch average pooling (aten/src/ATen/native/cuda/AveragePool2d.cu: avg_pool2d_out_cuda_frame) ----------
# pool_size counted before the window is clipped; count_include_pad chooses the divisor


@gk.kernel
def avg_pool_nchw(bottom, top, channels, height, width, pooled_h, pooled_w, k, stride, pad, count_include_pad):
    index = gk.tid()
    pw = index % pooled_w
    ph = (index // pooled_w) % pooled_h
    c = (index // pooled_w // pooled_h) % channels
    n = index // pooled_w // pooled_h // channels
    hstart = ph * stride - pad
    wstart = pw * stride - pad
    hend = min(hstart + k, height + pad)
    wend = min(wstart + k, width + pad)
    pool_size = (hend - hstart) * (wend - wstart)
    hstart = max(hstart, 0)
    wstart = max(wstart, 0)
    hend = min(hend, height)
    wend = min(wend, width)
    if hstart >= hend or wstart >= wend:
        top[index] = 0.0
        return
    aveval = 0.0
    for h in range(hstart, hend):
        for w in range(wstart, wend):
            aveval += bottom[n, c, h, w]
    divide_factor = pool_size if count_include_pad else (hend - hstart) * (wend - wstart)
    top[index] = aveval / divide_factor


# ---- Caffe im2col (BVLC/caffe src/caffe/util/im2col.cu: im2col_gpu_kernel): one thread per (channel, output
# pixel) writes its kernel_h * kernel_w column entries, stepping the column offset by height_col * width_col ------


@gk.kernel
def im2col(data_im, data_col, height, width, kernel_h, kernel_w, pad, stride, dil, height_col, width_col):
    index = gk.tid()
    h_index = index // width_col
    h_col = h_index % height_col
    w_col = index % width_col
    c_im = h_index // height_col
    c_col = c_im * kernel_h * kernel_w
    h_offset = h_col * stride - pad
    w_offset = w_col * stride - pad
    col = (c_col * height_col + h_col) * width_col + w_col
    im = (c_im * height + h_offset) * width + w_offset
    for i in range(kernel_h):
        for j in range(kernel_w):
            h_im = h_offset + i * dil
            w_im = w_offset + j * dil
            data_col[col] = (data_im[im + i * dil * width + j * dil]
                             if h_im >= 0 and w_im >= 0 and h_im < height and w_im < width else 0.0)
            col += height_col * width_col


# ---- PyTorch bilinear upsampling, align_corners=False (aten/src/ATen/native/cuda/UpSampleBilinear2d.cu:
# upsample_bilinear2d_out_frame with area_pixel_compute_source_index): one output pixel a thread, all (n, c) ------


@gk.func
def source_index(scale, dst_index, align_corners):
    if align_corners:
        return scale * dst_index
    src = scale * (dst_index + 0.5) - 0.5
    return 0.0 if src < 0.0 else src


@gk.kernel
def upsample_bilinear(idata, odata, rheight, rwidth, align_corners):
    index = gk.tid()
    nb, channels, height1, width1 = idata.shape
    width2 = odata.shape[3]
    w2 = index % width2
    h2 = index // width2
    h1r = source_index(rheight, h2, align_corners)
    h1 = int(h1r)
    h1p = 1 if h1 < height1 - 1 else 0
    h1lambda = h1r - h1
    h0lambda = 1.0 - h1lambda
    w1r = source_index(rwidth, w2, align_corners)
    w1 = int(w1r)
    w1p = 1 if w1 < width1 - 1 else 0
    w1lambda = w1r - w1
    w0lambda = 1.0 - w1lambda
    for n in range(nb):
        for c in range(channels):
            odata[n, c, h2, w2] = (h0lambda * (w0lambda * idata[n, c, h1, w1] + w1lambda * idata[n, c, h1, w1 + w1p])
                                   + h1lambda * (w0lambda * idata[n, c, h1 + h1p, w1]
                                                 + w1lambda * idata[n, c, h1 + h1p, w1 + w1p]))


# ---- PyTorch grid_sample, bilinear, zeros padding, align_corners=False (aten/src/ATen/native/cuda/
# GridSampler.cu: grid_sampler_2d_kernel, GridSampler.cuh: grid_sampler_unnormalize, within_bounds_2d) --------


@gk.func
def within_bounds_2d(h, w, height, width):
    return h >= 0 and h < height and w >= 0 and w < width


@gk.kernel
def grid_sample_bilinear(inp, grid, out):
    index = gk.tid()
    nb, channels, inp_h, inp_w = inp.shape
    out_h, out_w = out.shape[2], out.shape[3]
    w = index % out_w
    h = (index // out_w) % out_h
    n = index // (out_h * out_w)
    ix = ((grid[n, h, w, 0] + 1.0) * inp_w - 1.0) / 2.0
    iy = ((grid[n, h, w, 1] + 1.0) * inp_h - 1.0) / 2.0
    ix_nw = math.floor(ix)
    iy_nw = math.floor(iy)
    ix_ne = ix_nw + 1.0
    iy_ne = iy_nw
    ix_sw = ix_nw
    iy_sw = iy_nw + 1.0
    ix_se = ix_nw + 1.0
    iy_se = iy_nw + 1.0
    nw = (ix_se - ix) * (iy_se - iy)
    ne = (ix - ix_sw) * (iy_sw - iy)
    sw = (ix_ne - ix) * (iy - iy_ne)
    se = (ix - ix_nw) * (iy - iy_nw)
    x0 = int(ix_nw)
    y0 = int(iy_nw)
    for c in range(channels):
        v = 0.0
        if within_bounds_2d(y0, x0, inp_h, inp_w):
            v += inp[n, c, y0, x0] * nw
        if within_bounds_2d(y0, x0 + 1, inp_h, inp_w):
            v += inp[n, c, y0, x0 + 1] * ne
        if within_bounds_2d(y0 + 1, x0, inp_h, inp_w):
            v += inp[n, c, y0 + 1, x0] * sw
        if within_bounds_2d(y0 + 1, x0 + 1, inp_h, inp_w):
            v += inp[n, c, y0 + 1, x0 + 1] * se
        out[n, c, h, w] = v


# ---- llm.c AdamW (train_gpt2.cu: adamw_kernel3 with lerp; dev/cuda/adamw.cu): the moments updated in place,
# bias-corrected, weight decay decoupled ------------------------------------------------------------------------


@gk.func
def lerp(start, end, weight):
    return start + weight * (end - start)


@gk.kernel
def adamw(params, grads, m_memory, v_memory, n, lr, beta1, beta2, beta1_correction, beta2_correction, eps,
          weight_decay):
    i = gk.tid()
    if i >= n:
        return
    grad = grads[i]
    m = lerp(grad, m_memory[i], beta1)
    m_memory[i] = m
    v = lerp(grad * grad, v_memory[i], beta2)
    v_memory[i] = v
    m /= beta1_correction
    v /= beta2_correction
    params[i] -= lr * (m / (math.sqrt(v) + eps) + weight_decay * params[i])


# ---- PyTorch batch norm in training (aten/src/ATen/native/cuda/Normalization.cuh:
# batch_norm_collect_statistics_kernel's Welford update, then batch_norm_transform_input_kernel), a channel a
# thread; the running statistics updated with the unbiased variance -----------------------------------------------


@gk.kernel
def batch_norm_train(inp, out, weight, bias, running_mean, running_var, save_mean, save_invstd, momentum, eps):
    c = gk.tid()
    nb, channels, height, width = inp.shape
    avg = 0.0
    var_n = 0.0
    count = 0.0
    for n in range(nb):
        for y in range(height):
            for x in range(width):
                v = inp[n, c, y, x]
                count += 1.0
                delta = v - avg
                avg += delta / count
                var_n += delta * (v - avg)
    invstd = 1.0 / math.sqrt(var_n / count + eps)
    save_mean[c] = avg
    save_invstd[c] = invstd
    running_mean[c] = momentum * avg + (1.0 - momentum) * running_mean[c]
    running_var[c] = momentum * var_n / (count - 1.0) + (1.0 - momentum) * running_var[c]
    for n in range(nb):
        for y in range(height):
            for x in range(width):
                out[n, c, y, x] = (inp[n, c, y, x] - avg) * invstd * weight[c] + bias[c]
