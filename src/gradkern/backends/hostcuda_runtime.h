// What CUDA provides to gradkern's generated CUDA C, for the host (the hostcuda backend,
// src/gradkern/backends/hostcuda.py; the decisions are in docs/hostcuda.md).
//
// The generated translation unit is compiled unchanged by g++ -std=c++20 after this header, then the launcher at
// the end is instantiated for its entry. Only what CUDA itself offers is supplied, with CUDA's signatures: an
// atomicAdd overload CUDA lacks (long long) is missing here too, so code nvcc would refuse is refused here too.
//
// No standard header is included: <atomic> and <cmath> alone take g++ about 1.5 s to parse, ten times what a
// generated kernel takes to compile (docs/hostcuda.md, "Compile time"). The atomics are GCC's __atomic built-ins
// (what libstdc++'s std::atomic_ref is made of), the math functions the C library's, declared below.
#pragma once

// ---- qualifiers: the host has one address space and one kind of function -------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
// __restrict__ is a g++ keyword already

// ---- the built-in variables: per host thread, set by the launcher before each CUDA thread runs ---------------
struct dim3 {
    unsigned int x = 1, y = 1, z = 1;
};
// static: each generated library has its own (no symbol is shared between libraries loaded in one process)
static thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;
static constexpr int warpSize = 32;

// ---- atomics on host memory, relaxed as CUDA's are --------------------------------------------------------------
template <class T> inline T _gk_hostcuda_add_int(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
// a float add is a compare-and-swap loop on the value (std::atomic_ref<float>::fetch_add does the same)
template <class T> inline T _gk_hostcuda_add_float(T* p, T v) {
    T old;
    __atomic_load(p, &old, __ATOMIC_RELAXED);
    T sum = old + v;
    while (!__atomic_compare_exchange(p, &old, &sum, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) sum = old + v;
    return old;
}
inline int atomicAdd(int* p, int v) { return _gk_hostcuda_add_int(p, v); }
inline unsigned int atomicAdd(unsigned int* p, unsigned int v) { return _gk_hostcuda_add_int(p, v); }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { return _gk_hostcuda_add_int(p, v); }
inline float atomicAdd(float* p, float v) { return _gk_hostcuda_add_float(p, v); }
inline double atomicAdd(double* p, double v) { return _gk_hostcuda_add_float(p, v); }

template <class T> inline T _gk_hostcuda_cas(T* p, T compare, T value) {
    __atomic_compare_exchange_n(p, &compare, value, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return compare;  // the old value, as CUDA's atomicCAS returns it
}
inline int atomicCAS(int* p, int compare, int value) { return _gk_hostcuda_cas(p, compare, value); }
inline unsigned int atomicCAS(unsigned int* p, unsigned int compare, unsigned int value) {
    return _gk_hostcuda_cas(p, compare, value);
}
inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long compare, unsigned long long value) {
    return _gk_hostcuda_cas(p, compare, value);
}

// ---- bit casts --------------------------------------------------------------------------------------------------
inline float __int_as_float(int x) { return __builtin_bit_cast(float, x); }
inline int __float_as_int(float x) { return __builtin_bit_cast(int, x); }
inline double __longlong_as_double(long long x) { return __builtin_bit_cast(double, x); }
inline long long __double_as_longlong(double x) { return __builtin_bit_cast(long long, x); }

// ---- the C library's math the hand-written prelude calls (backends/cuda.py: PRELUDE, _FLOAT_DIV) --------------
// The elementary functions of the op table (ir/ops.py) are declared by each launcher, from the table
// (backends/hostcuda.py: DECLARATIONS). The host's libm: results may differ from CUDA's device functions by a
// few ulps (docs/hostcuda.md).
#define GK_HOSTCUDA_MATH1(name) double name(double) noexcept; float name##f(float) noexcept;
#define GK_HOSTCUDA_MATH2(name) double name(double, double) noexcept; float name##f(float, float) noexcept;
extern "C" {
GK_HOSTCUDA_MATH1(fabs) GK_HOSTCUDA_MATH1(ceil) GK_HOSTCUDA_MATH1(floor)
GK_HOSTCUDA_MATH2(copysign) GK_HOSTCUDA_MATH2(fmod) GK_HOSTCUDA_MATH2(pow)
}
#undef GK_HOSTCUDA_MATH1
#undef GK_HOSTCUDA_MATH2

// ---- the launcher: one CUDA grid, block after block, thread after thread ---------------------------------------
namespace gk_hostcuda {

template <class T> struct bare { using type = T; };
template <class T> struct bare<const T> { using type = T; };

// Each argument sits in an 8-byte slot (a pointer, or a scalar's bytes at the slot's start), in the kernel's
// parameter order: the CUDA driver's kernelParams, laid out flat.
template <class T> inline T slot(const unsigned char* slots, unsigned long i) {
    typename bare<T>::type v;
    static_assert(sizeof v <= 8, "a kernel argument wider than a slot");
    __builtin_memcpy(&v, slots + 8 * i, sizeof v);
    return v;
}

template <class F, class... A> struct caller;
template <class... A> struct caller<void (*)(A...)> {
    template <unsigned long... I> struct at {
        static void run(void (*f)(A...), const unsigned char* slots) { f(slot<A>(slots, I)...); }
    };
    template <unsigned long N, unsigned long... I> struct count : count<N - 1, N - 1, I...> {};
    template <unsigned long... I> struct count<0, I...> { using type = at<I...>; };
    static void run(void (*f)(A...), const unsigned char* slots) { count<sizeof...(A)>::type::run(f, slots); }
};

// Run `nblocks` blocks of a grid of `grid` blocks of `block` threads: block blocks[b] for each b, its threads in
// the order `threads` gives (nullptr: 0, 1, ..., block - 1). The generated kernels are grid-stride loops with no
// shared memory and no __syncthreads, so any such order is a schedule a GPU may take.
template <class... A>
inline void launch(void (*f)(A...), const unsigned char* slots, unsigned int grid, unsigned int block,
                   const long long* blocks, long long nblocks, const long long* threads) {
    gridDim = dim3{grid, 1, 1};
    blockDim = dim3{block, 1, 1};
    for (long long b = 0; b < nblocks; ++b) {
        blockIdx = dim3{static_cast<unsigned int>(blocks[b]), 0, 0};
        for (unsigned int t = 0; t < block; ++t) {
            threadIdx = dim3{threads ? static_cast<unsigned int>(threads[t]) : t, 0, 0};
            caller<void (*)(A...)>::run(f, slots);
        }
    }
}

}  // namespace gk_hostcuda

// The one exported function of a generated library (backends/hostcuda.py calls it through ctypes).
#define GK_HOSTCUDA_LAUNCHER(entry)                                                                                \
    extern "C" __attribute__((visibility("default"))) void gk_hostcuda_launch(                                    \
        const unsigned char* slots, unsigned int grid, unsigned int block, const long long* blocks,               \
        long long nblocks, const long long* threads) {                                                             \
        gk_hostcuda::launch(entry, slots, grid, block, blocks, nblocks, threads);                                 \
    }
