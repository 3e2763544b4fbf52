"""An eighth round of third-party host loops ported as programs (session 55; docs/programs.md, "Ported host loops"),
part 2: Rodinia's CUDA hotspot driver, whose launches each run up to `pyramid_height` steps and whose result is in
whichever of two buffers its index toggle left it, and PolyBench/GPU's 3-D convolution, a launch per plane. Written
here from the drivers cited, as a user porting them writes them. Used by tests/program/test_ported_loops8.py."""

import math

import numpy as np

import gradkern as gk

# -- Rodinia 3.1 cuda/hotspot/hotspot.cu (compute_tran_temp: the constants host arithmetic on t_chip, `int src = 1,
# dst = 0; for (t = 0; t < total_iterations; t += num_iterations) { temp = src; src = dst; dst = temp;
# calculate_temp<<<>>>(MIN(num_iterations, total_iterations - t), MatrixPower, MatrixTemp[src], MatrixTemp[dst], ...);
# } return dst;`, then main's `cudaMemcpy(MatrixOut, MatrixTemp[ret], ...)`): calculate_temp's pyramid runs
# `iteration` steps in shared memory, a cell whose neighbour lies outside the chip taking itself (the C's
# validYmin / validXmax tests); here each thread runs them on its own window of radius PYRAMID, clamped the same way.
# t_chip Active --------------------------------------------------------------------------------------------------------
PYRAMID = 2  # the window's radius: at most this many steps a launch


@gk.kernel
def calculate_temp(iteration, power, temp_src, temp_dst, cap, rx, ry, rz, step, amb):
    i, j = gk.tid()
    rows = temp_src.shape[0]
    cols = temp_src.shape[1]
    w = gk.local((5, 5), gk.float64)
    nxt = gk.local((5, 5), gk.float64)
    for a in range(5):
        for b in range(5):
            w[a, b] = temp_src[min(max(i + a - PYRAMID, 0), rows - 1), min(max(j + b - PYRAMID, 0), cols - 1)]
            nxt[a, b] = w[a, b]
    sdc = step / cap
    for it in range(iteration):
        for a in range(1, 4):  # after step `it`, the cells within PYRAMID - 1 - it of the centre are needed
            for b in range(1, 4):
                gi = i + a - PYRAMID
                gj = j + b - PYRAMID
                inside = gi >= 0 and gi < rows and gj >= 0 and gj < cols
                if inside and abs(a - PYRAMID) < PYRAMID - it and abs(b - PYRAMID) < PYRAMID - it:
                    c = w[a, b]
                    n = w[a - 1, b] if gi > 0 else c
                    s = w[a + 1, b] if gi < rows - 1 else c
                    west = w[a, b - 1] if gj > 0 else c
                    e = w[a, b + 1] if gj < cols - 1 else c
                    nxt[a, b] = c + sdc * (power[gi, gj] + (s + n - 2.0 * c) / ry + (e + west - 2.0 * c) / rx +
                                           (amb - c) / rz)
        for a in range(5):
            for b in range(5):
                w[a, b] = nxt[a, b]
    temp_dst[i, j] = w[PYRAMID, PYRAMID]


HOTSPOT = dict(total_iterations=3, pyramid_height=2, amb=80.0)  # launches of 2 steps and of 1


def _chip_constants(t_chip, rows, cols):
    """compute_tran_temp's constants (hotspot.cu's chip, 0.016 m square, and its material constants)."""
    grid_height = 0.016 / rows
    grid_width = 0.016 / cols
    cap = 0.5 * 1.75e6 * t_chip * grid_width * grid_height
    rx = grid_width / (2.0 * 100 * t_chip * grid_height)
    ry = grid_height / (2.0 * 100 * t_chip * grid_width)
    rz = t_chip / (100 * grid_height * grid_width)
    max_slope = 3.0e6 / (0.5 * t_chip * 1.75e6)
    return cap, rx, ry, rz, 0.001 / max_slope


def rodinia_hotspot(loop=None):
    """compute_tran_temp as written (`loop` None: the index toggle in the host loop, the result copied from
    MatrixTemp[ret]); with `loop`, a step t picks the buffers from t's parity and runs MIN(num_iterations,
    total_iterations - t * num_iterations) steps."""
    c = HOTSPOT

    def program(power, temp, scratch, out, t_chip):
        rows, cols = temp.shape
        cap, rx, ry, rz, step = _chip_constants(t_chip, rows, cols)
        matrix_temp = [temp, scratch]
        total, num = c["total_iterations"], c["pyramid_height"]
        if loop is None:
            src, dst = 1, 0
            for t in range(0, total, num):
                src, dst = dst, src
                gk.launch(calculate_temp, temp.shape, min(num, total - t), power, matrix_temp[src], matrix_temp[dst],
                          cap, rx, ry, rz, step, c["amb"])
            ret = dst
        else:
            def launch(k):
                gk.launch(calculate_temp, temp.shape, min(num, total - k * num), power, matrix_temp[k % 2],
                          matrix_temp[1 - k % 2], cap, rx, ry, rz, step, c["amb"])
            launches = (total + num - 1) // num
            loop(launch, launches)
            ret = launches % 2
        np.copyto(out, matrix_temp[ret])
    return program


# -- PolyBench/GPU 1.0 CUDA/3DCONV/3DConvolution.cu (convolution3DCuda: `for (i = 1; i < NI - 1; ++i)
# convolution3D_kernel<<<grid, block>>>(A_gpu, B_gpu, i);`, the kernel's thread (j, k) guarded to the interior):
# the plane a run-time argument, the fifteen-tap stencil with PolyBench's coefficients, the centre's c22 Active
# (PolyBench's +6/10) --------------------------------------------------------------------------------------------------
@gk.kernel
def convolution3d_plane(A, B, i, c22):
    j, k = gk.tid()
    nj = A.shape[1]
    nk = A.shape[2]
    c11 = 0.2
    c12 = -0.3
    c13 = 0.4
    c21 = 0.5
    c23 = 0.7
    c31 = -0.8
    c32 = -0.9
    c33 = 1.0
    if j > 0 and k > 0 and j < nj - 1 and k < nk - 1:
        B[i, j, k] = (c11 * A[i - 1, j - 1, k - 1] + c13 * A[i + 1, j - 1, k - 1] + c21 * A[i - 1, j - 1, k - 1] +
                      c23 * A[i + 1, j - 1, k - 1] + c31 * A[i - 1, j - 1, k - 1] + c33 * A[i + 1, j - 1, k - 1] +
                      c12 * A[i, j - 1, k] + c22 * A[i, j, k] + c32 * A[i, j + 1, k] +
                      c11 * A[i - 1, j - 1, k + 1] + c13 * A[i + 1, j - 1, k + 1] + c21 * A[i - 1, j, k + 1] +
                      c23 * A[i + 1, j, k + 1] + c31 * A[i - 1, j + 1, k + 1] + c33 * A[i + 1, j + 1, k + 1])


def polybench_conv3d(loop):
    def program(A, B, c22):
        ni = A.shape[0]

        def plane(t):
            gk.launch(convolution3d_plane, A.shape[1:], A, B, t + 1, c22)
        loop(plane, ni - 2)
    return program


# -- NVIDIA cuda-samples Samples/5_Domain_Specific/bilateralFilter/bilateral_kernel.cu (updateGaussian's table
# `fGaussian[i] = expf(-(x * x) / (2 * delta * delta))` copied to constant memory, then bilateralFilterRGBA: `for (i =
# 0; i < iterations; i++) { d_bilateral_filter<<<>>>(dDest, w, h, e_d, radius, rgbaTexdTemp); cudaMemcpy2D(dTemp,
# dDest, cudaMemcpyDeviceToDevice); }`): one channel in floats (the C's RGBA in bytes), the texture's wrap addressing
# as `%`, the table made by a kernel from the Active delta (NumPy's np.exp of an Active scalar is refused: no launch
# would record its derivative), dTemp starting as the image; delta and e_d Active --------------------------------------
@gk.kernel
def bilateral_gaussian(g, delta, radius):
    i = gk.tid()
    x = float(i - radius)
    g[i] = math.exp(-(x * x) / (2.0 * delta * delta))


@gk.kernel
def bilateral_filter(od, img, g, e_d, r):
    y, x = gk.tid()
    h = img.shape[0]
    w = img.shape[1]
    center = img[y, x]
    total = 0.0
    t = 0.0
    for i in range(-r, r + 1):
        for j in range(-r, r + 1):
            cur = img[(y + i + h) % h, (x + j + w) % w]  # r < h, w: never negative
            factor = g[i + r] * g[j + r] * math.exp(-((cur - center) * (cur - center)) / (2.0 * e_d * e_d))
            t += factor * cur
            total += factor
    od[y, x] = t / total


BILATERAL = dict(radius=1, iterations=3)


def bilateral(loop):
    c = BILATERAL

    def program(image, dest, delta, e_d):
        r = c["radius"]
        g = np.zeros(2 * r + 1)
        gk.launch(bilateral_gaussian, 2 * r + 1, g, delta, r)
        temp = image.copy()

        def iteration(i):
            gk.launch(bilateral_filter, image.shape, dest, temp, g, e_d, r)
            gk.copy(temp, dest)  # cudaMemcpy2D(dTemp, ..., dDest, ..., cudaMemcpyDeviceToDevice)
        loop(iteration, c["iterations"])
    return program


# -- NVIDIA cuda-samples Samples/5_Domain_Specific/BlackScholes (BlackScholes.cu: `for (i = 0; i < NUM_ITERATIONS;
# i++) BlackScholesGPU<<<>>>(d_CallResult, d_PutResult, d_StockPrice, d_OptionStrike, d_OptionYears, RISKFREE,
# VOLATILITY, OPT_N);`; BlackScholes_kernel.cuh's cndGPU, the Abramowitz-Stegun polynomial, and
# BlackScholesBodyGPU): the same launch repeated, each overwriting the results, so the gradient is one launch's;
# RISKFREE and VOLATILITY Active --------------------------------------------------------------------------------------
@gk.func
def _cnd(d):
    k = 1.0 / (1.0 + 0.2316419 * abs(d))
    c = 0.3989422804014327 * math.exp(-0.5 * d * d) * \
        (k * (0.31938153 + k * (-0.356563782 + k * (1.781477937 + k * (-1.821255978 + k * 1.330274429)))))
    if d > 0.0:
        c = 1.0 - c
    return c


@gk.kernel
def black_scholes(call, put, S, X, T, R, V):
    i = gk.tid()
    sqrt_t = math.sqrt(T[i])
    d1 = (math.log(S[i] / X[i]) + (R + 0.5 * V * V) * T[i]) / (V * sqrt_t)
    d2 = d1 - V * sqrt_t
    cnd1 = _cnd(d1)
    cnd2 = _cnd(d2)
    exp_rt = math.exp(-R * T[i])
    call[i] = S[i] * cnd1 - X[i] * exp_rt * cnd2
    put[i] = X[i] * exp_rt * (1.0 - cnd2) - S[i] * (1.0 - cnd1)


def black_scholes_loop(loop, iterations=3):
    def program(call, put, S, X, T, R, V):
        def iteration(i):
            gk.launch(black_scholes, S.shape[0], call, put, S, X, T, R, V)
        loop(iteration, iterations)
    return program
