"""A sixth round of third-party host loops ported as programs (session 53; docs/programs.md, "Ported host loops"),
part 2: drivers whose loop count comes from the data (Rodinia's kmeans until few points move, with the membership an
np.argmin on the host; Rodinia's bfs `do { ... } while (stop)` as a shortest-path relaxation; GAP's PageRank until
the change is small) and miniWeather's main loop (the last step cut to the end time, output every output_freq of
simulated time into a preallocated history). Written here from the algorithms, as a user porting the driver writes
it. Used by tests/program/test_ported_loops6.py."""

import math

import numpy as np

import gradkern as gk


# -- Rodinia 3.1 kmeans (openmp/kmeans_clustering.c: `do { delta = 0; for each point: index = find_nearest_point;
# if (membership[i] != index) delta += 1; new_centers[index] += feature[i]; new_centers_len[index]++; } centers =
# new_centers / len; } while (delta > threshold && loop++ < 500)`): the distances in a kernel, the nearest centre
# np.argmin on the host (an integer image: no derivative), the sums by atomic_add through the membership, the counts
# np.bincount of it; the features differentiated through the centres ---------------------------------------------
@gk.kernel
def km_distances(features, centers, dist):
    i, c = gk.tid()
    s = 0.0
    for d in range(features.shape[1]):
        e = features[i, d] - centers[c, d]
        s += e * e
    dist[i, c] = s


@gk.kernel
def km_accumulate(features, membership, sums):
    i, d = gk.tid()
    gk.atomic_add(sums, (membership[i], d), features[i, d])


@gk.kernel
def km_centers(sums, counts, centers):
    c, d = gk.tid()
    centers[c, d] = sums[c, d] / counts[c]


def kmeans(threshold=0, max_loops=20, moved=None):
    def program(features, centers):
        n, k = features.shape[0], centers.shape[0]
        dist = np.zeros_like(features, shape=(n, k))
        sums = np.zeros_like(centers)
        membership = np.full(n, -1)
        loops = 0
        while True:
            gk.launch(km_distances, (n, k), features, centers, dist)
            index = np.argmin(dist, axis=1)  # find_nearest_point on the host: integers, no derivative
            delta = int((index != membership).sum())
            membership = index
            if moved is not None:
                moved.append(delta)
            counts = np.bincount(membership, minlength=k).astype(np.float64)
            gk.fill(sums, 0.0)
            gk.launch(km_accumulate, features.shape, features, membership, sums)
            gk.launch(km_centers, centers.shape, sums, counts, centers)
            loops += 1
            if not (delta > threshold and loops < max_loops):
                break
    return program


def kmeans_host_centers(features, centers):
    """The new centres summed on the host, as kmeans_clustering.c does, then copied into the argument."""
    n, k = features.shape[0], centers.shape[0]
    dist = np.zeros_like(features, shape=(n, k))
    gk.launch(km_distances, (n, k), features, centers, dist)
    membership = np.argmin(dist, axis=1)
    new_centers = np.zeros_like(centers)
    for i in range(n):
        new_centers[membership[i]] += features[i]
    gk.copy(centers, new_centers / np.bincount(membership, minlength=k)[:, None])


# -- Rodinia 3.1 bfs (openmp/bfs.cpp: `do { stop = false; for each node in the frontier: relax its edges; ...; }
# while (!stop)`), as a single-source shortest path with weights (Bellman-Ford, pulled: a thread a vertex takes
# the least of its in-edges, a fixed in-degree; `changed` counts the vertices that improved, read by the host's
# `while`); the distances ping-pong by name; a uniform extra cost per edge c Active ------------------------------
@gk.kernel
def sssp_relax(dist, dnew, src, w, c, changed):
    v = gk.tid()
    best = dist[v]
    for e in range(src.shape[1]):
        cand = dist[src[v, e]] + w[v, e] + c
        if cand < best:
            best = cand
    dnew[v] = best
    if best < dist[v]:
        gk.atomic_add(changed, 0, 1.0)


def sssp(max_rounds=50, rounds=None):
    def program(dist, w, src, c):
        n = dist.shape[0]
        changed = np.zeros_like(dist, shape=(1,))
        cur, nxt = dist, np.zeros_like(dist)
        r = 0
        while True:  # Rodinia's do { ... } while (stop)
            gk.fill(changed, 0.0)
            gk.launch(sssp_relax, n, cur, nxt, src, w, c, changed)
            cur, nxt = nxt, cur
            r += 1
            if changed[0] == 0 or r >= max_rounds:
                break
        if rounds is not None:
            rounds.append(r)
        if cur is not dist:
            gk.copy(dist, cur)
    return program


# -- GAP Benchmark Suite 1.4 PageRank (src/pr.cc, PageRankPullGS's Jacobi twin PageRankPull: `for (iter <
# max_iters) { contrib[u] = scores[u] / out_degree[u]; scores[u] = base_score + kDamp * incoming_total; error +=
# fabs(scores[u] - old_score); if (error < epsilon) break; }`, base_score = (1 - kDamp) / n): the error summed by
# atomic_add and compared on the host; base_score host arithmetic on the Active damping ---------------------------
@gk.kernel
def pr_contrib(scores, out_degree, contrib):
    u = gk.tid()
    contrib[u] = scores[u] / out_degree[u]


@gk.kernel
def pr_pull(contrib, src, scores, base, damp, error):
    u = gk.tid()
    total = 0.0
    for e in range(src.shape[1]):
        total += contrib[src[u, e]]
    new = base + damp * total
    gk.atomic_add(error, 0, abs(new - scores[u]))
    scores[u] = new


def pagerank(epsilon=1e-4, max_iters=30, iterations=None):
    def program(scores, src, out_degree, damp):
        n = scores.shape[0]
        contrib = np.zeros_like(scores)
        error = np.zeros_like(scores, shape=(1,))
        base = (1.0 - damp) / n  # Active scalar arithmetic
        for it in range(max_iters):
            gk.launch(pr_contrib, n, scores, out_degree, contrib)
            gk.fill(error, 0.0)
            gk.launch(pr_pull, n, contrib, src, scores, base, damp, error)
            if error[0] < epsilon:
                break
        if iterations is not None:
            iterations.append(it + 1)
    return program


# -- miniWeather (c/miniWeather_serial.cpp main: `dt = min(dx, dz) / max_speed * cfl`, then `while (etime <
# sim_time) { if (etime + dt > sim_time) dt = sim_time - etime; perform_timestep(...); etime = etime + dt;
# output_counter = output_counter + dt; if (output_counter >= output_freq) { output_counter = output_counter -
# output_freq; output(state, etime); } }`), the step a 1-D periodic upwind advection with halos copied by gk.copy,
# the output a gk.copy into history[nout]; the wind speed c Active, so dt, etime and the counter are Active scalars
# (host arithmetic, compared in the loop's tests, formatted in the report); `fixed`: the fixed-step spelling,
# `nt = math.ceil(sim_time / dt)` then `dt = sim_time / nt` (a rounding of an Active scalar: a constant) ----------
@gk.kernel
def mw1_upwind(q, qnew, cdx):
    i = gk.tid() + 1
    qnew[i] = q[i] - cdx * (q[i] - q[i - 1])


def miniweather_main(sim_time=1.0, cfl=0.8, output_freq=0.3, fixed=False, outputs=None, log=None):
    def program(q, history, c):
        n = q.shape[0] - 2
        dx = 1.0 / n
        qnew = np.zeros_like(q)
        dt = dx / c * cfl  # an Active scalar
        if fixed:
            nt = math.ceil(sim_time / dt)
            dt = sim_time / nt
        etime, output_counter, nout = 0.0, 0.0, 0
        while etime < sim_time * (1.0 - 1e-12):
            if etime + dt > sim_time:
                dt = sim_time - etime
            gk.copy(q[0:1], q[n:n + 1])  # set_halo_values_x: periodic
            gk.launch(mw1_upwind, n, q, qnew, c * dt / dx)
            gk.copy(q[1:-1], qnew[1:-1])
            etime = etime + dt
            message = f"Elapsed Time: {etime:f} / {sim_time:f}"  # main's printf, every step
            if log is not None:
                log.append(message)
            output_counter = output_counter + dt
            if output_counter >= output_freq:
                output_counter = output_counter - output_freq
                gk.copy(history[nout], q[1:-1])
                nout += 1
        if outputs is not None:
            outputs.append(nout)
    return program
