// halo's stand-in for Metal's <metal_stdlib>, so that the MSL that SPIRV-Cross writes for IREE
// compiles as C++ for OpenCL (`clang -x clcpp`) into host code. C++ for OpenCL keeps address
// spaces distinct types (helpers overloaded on them stay distinct) and knows vector types with
// swizzles; everything here maps Metal's names onto it. Grown as kernels need more of Metal.
#pragma once

#define kernel
#define device __global
#define threadgroup __local
#define thread __private

#pragma OPENCL EXTENSION cl_khr_fp16 : enable

typedef __SIZE_TYPE__ size_t;
typedef __PTRDIFF_TYPE__ ptrdiff_t;
typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;

#define HALO_VECTORS(T)                                              \
    typedef T T##2 __attribute__((ext_vector_type(2)));             \
    typedef T T##3 __attribute__((ext_vector_type(3)));             \
    typedef T T##4 __attribute__((ext_vector_type(4)));
HALO_VECTORS(char)
HALO_VECTORS(uchar)
HALO_VECTORS(short)
HALO_VECTORS(ushort)
HALO_VECTORS(int)
HALO_VECTORS(uint)
HALO_VECTORS(long)
HALO_VECTORS(ulong)
HALO_VECTORS(float)
HALO_VECTORS(half)
#undef HALO_VECTORS

// Metal's vector template (`vec<float, 4>` is `float4`). Vectors of bool, which C++ for OpenCL
// lacks, are vectors of char here.
template <typename T, uint N>
struct halo_vector {
    typedef T type __attribute__((ext_vector_type(N)));
};
template <uint N>
struct halo_vector<bool, N> {
    typedef char type __attribute__((ext_vector_type(N)));
};
template <typename T, uint N>
using vec = typename halo_vector<T, N>::type;
// `boolN` declared without a value: the lane masks comparisons of 32-bit vectors give, which
// `select` and `?:` take (halo rewrites `boolN x = a < b;` to `auto`, which keeps any width).
typedef int bool2 __attribute__((ext_vector_type(2)));
typedef int bool3 __attribute__((ext_vector_type(3)));
typedef int bool4 __attribute__((ext_vector_type(4)));

// The conversions between half and float that clang calls where the CPU has no instruction for
// them (x86-64 without F16C); defined here so a library needs no compiler runtime. IEEE 754
// binary16, rounding to nearest even.
extern "C" float __gnu_h2f_ieee(ushort h) {
    uint sign = (uint)(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
    if (exponent == 0) {
        float magnitude = (float)mantissa * 5.9604644775390625e-8f;  // 2^-24
        return sign ? -magnitude : magnitude;
    }
    uint bits = exponent == 31 ? sign | 0x7f800000u | (mantissa << 13)
                               : sign | ((exponent + 112u) << 23) | (mantissa << 13);
    return __builtin_bit_cast(float, bits);
}
extern "C" ushort __gnu_f2h_ieee(float f) {
    uint x = __builtin_bit_cast(uint, f);
    uint sign = (x >> 16) & 0x8000u, magnitude = x & 0x7fffffffu;
    if (magnitude >= 0x7f800000u)  // infinity, or NaN kept quiet with its top payload bits
        return (ushort)(sign | 0x7c00u | (magnitude > 0x7f800000u ? 0x200u | ((magnitude >> 13) & 0x3ffu) : 0u));
    if (magnitude >= 0x477ff000u)  // 65520 and above round to infinity
        return (ushort)(sign | 0x7c00u);
    uint result, rest, halfway;
    if (magnitude < 0x38800000u) {  // below 2^-14: a subnormal half, or zero
        if (magnitude < 0x33000000u) return (ushort)sign;
        uint shift = 126u - (magnitude >> 23), mantissa = (magnitude & 0x7fffffu) | 0x800000u;
        result = mantissa >> shift;
        rest = mantissa & ((1u << shift) - 1u);
        halfway = 1u << (shift - 1u);
    } else {
        uint rebiased = magnitude - 0x38000000u;
        result = rebiased >> 13;
        rest = rebiased & 0x1fffu;
        halfway = 0x1000u;
    }
    if (rest > halfway || (rest == halfway && (result & 1u))) result += 1u;
    return (ushort)(sign | result);
}

// How many elements a vector type has (1 for a scalar). `sizeof` cannot tell: a 3-element
// vector is as large as a 4-element one.
#define HALO_HAS(c)                                                                              \
    template <typename V> constexpr auto halo_has_##c(int) -> decltype((void)V{}.c, true) { return true; } \
    template <typename V> constexpr bool halo_has_##c(long) { return false; }
HALO_HAS(y)
HALO_HAS(z)
HALO_HAS(w)
#undef HALO_HAS
template <typename V>
constexpr int halo_lanes = halo_has_w<V>(0) ? 4 : halo_has_z<V>(0) ? 3 : halo_has_y<V>(0) ? 2 : 1;

// Metal's math, elementwise on vectors. Declared here, as C++ for OpenCL's own library is left out.
#define HALO_UNARY(name, f)                                                     \
    inline float name(float a) { return f(a); }                                 \
    template <typename V> inline V name(V a) {                                  \
        V r;                                                                    \
        for (int i = 0; i < halo_lanes<V>; ++i) r[i] = f(a[i]);                        \
        return r;                                                               \
    }
HALO_UNARY(sqrt, __builtin_sqrtf)
HALO_UNARY(exp, __builtin_expf)
HALO_UNARY(log, __builtin_logf)
HALO_UNARY(fabs, __builtin_fabsf)
HALO_UNARY(floor, __builtin_floorf)
HALO_UNARY(ceil, __builtin_ceilf)
HALO_UNARY(tanh, __builtin_tanhf)
HALO_UNARY(sin, __builtin_sinf)
HALO_UNARY(cos, __builtin_cosf)
HALO_UNARY(exp2, __builtin_exp2f)
HALO_UNARY(log2, __builtin_log2f)
HALO_UNARY(round, __builtin_roundf)
HALO_UNARY(trunc, __builtin_truncf)
HALO_UNARY(rint, __builtin_rintf)
HALO_UNARY(erf, __builtin_erff)
HALO_UNARY(atan, __builtin_atanf)
#undef HALO_UNARY

inline float rsqrt(float a) { return 1.0f / __builtin_sqrtf(a); }
inline float fmod(float a, float b) { return __builtin_fmodf(a, b); }
inline float pow(float a, float b) { return __builtin_powf(a, b); }
inline float powr(float a, float b) { return __builtin_powf(a, b); }
inline float atan2(float a, float b) { return __builtin_atan2f(a, b); }
// On vectors these give OpenCL's comparison masks, which `select` and `?:` take.
template <typename T> inline auto isnan(T a) { return a != a; }
template <typename T> inline auto isunordered(T a, T b) { return a != a || b != b; }
inline bool isinf(float a) { return __builtin_isinf(a); }
// Metal's select(a, b, c): c ? b : a, elementwise on vectors.
template <typename T, typename C> inline T select(T a, T b, C c) { return c ? b : a; }
inline int abs(int a) { return a < 0 ? -a : a; }
inline long abs(long a) { return a < 0 ? -a : a; }
inline float abs(float a) { return __builtin_fabsf(a); }
inline float copysign(float a, float b) { return __builtin_copysignf(a, b); }

inline float fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
template <typename V>
inline V fma(V a, V b, V c) {
    V r;
    for (int i = 0; i < halo_lanes<V>; ++i) r[i] = __builtin_fmaf(a[i], b[i], c[i]);
    return r;
}
// The dot product of two vectors.
template <typename V>
inline auto dot(V a, V b) {
    auto sum = a[0] * b[0];
    for (int i = 1; i < halo_lanes<V>; ++i) sum += a[i] * b[i];
    return sum;
}
template <typename T>
inline T max(T a, T b) { return a < b ? b : a; }
template <typename T>
inline T min(T a, T b) { return b < a ? b : a; }

// Metal's `fast::` and `precise::` variants; the emulated device computes both precisely.
namespace fast {
using ::exp; using ::log; using ::sqrt; using ::rsqrt; using ::tanh; using ::sin; using ::cos;
using ::exp2; using ::log2; using ::pow; using ::powr; using ::fabs; using ::max; using ::min;
using ::atan; using ::atan2; using ::fmod;
}
namespace precise {
using ::exp; using ::log; using ::sqrt; using ::rsqrt; using ::tanh; using ::sin; using ::cos;
using ::exp2; using ::log2; using ::pow; using ::powr; using ::fabs; using ::max; using ::min;
using ::atan; using ::atan2; using ::fmod;
}

namespace metal {
enum class mem_flags { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4 };
}  // namespace metal

// Threads run in lockstep (threadgroup_fibers.c, linked with libraries that need it): a barrier
// returns once every thread of the threadgroup still running has reached it.
extern "C" void halo_barrier(void);
extern "C" uint halo_thread_index(void);
extern "C" uint halo_thread_count(void);
extern "C" int halo_thread_done(uint index);
extern "C" __SIZE_TYPE__ halo_simd_slots(void);

inline void threadgroup_barrier(metal::mem_flags) { halo_barrier(); }
inline void simdgroup_barrier(metal::mem_flags) { halo_barrier(); }

// Simd-groups are 32 threads of consecutive index, as on Apple GPUs. Values up to 32 bytes. A
// lane leaves its value,
// all meet, each combines the values of its simd-group's running lanes, all meet again (so no
// slot is reused before everyone has read it).
template <typename T, typename Combine>
inline T halo_simd_reduce(T value, T identity, Combine combine) {
    uint index = halo_thread_index(), first = index - index % 32u, count = halo_thread_count();
    T* slots = (T*)halo_simd_slots();
    slots[index] = value;
    halo_barrier();
    T result = identity;
    for (uint lane = first; lane < first + 32u && lane < count; ++lane)
        if (!halo_thread_done(lane)) result = combine(result, slots[lane]);
    halo_barrier();
    return result;
}
// A lane's value as lane `lane` of its simd-group had it (a lane past the threadgroup's end keeps
// its own, as GPUs leave that undefined).
template <typename T>
inline T halo_simd_exchange(T value, uint lane) {
    uint index = halo_thread_index(), first = index - index % 32u;
    T* slots = (T*)halo_simd_slots();
    slots[index] = value;
    halo_barrier();
    T result = first + lane < halo_thread_count() ? slots[first + lane] : value;
    halo_barrier();
    return result;
}
template <typename T> inline T simd_shuffle(T x, ushort lane) { return halo_simd_exchange(x, lane % 32u); }
template <typename T> inline T simd_shuffle_xor(T x, ushort mask) {
    return halo_simd_exchange(x, (halo_thread_index() % 32u ^ mask) % 32u);
}
template <typename T> inline T simd_broadcast(T x, ushort lane) { return halo_simd_exchange(x, lane % 32u); }
template <typename T> inline T simd_sum(T x) { return halo_simd_reduce(x, (T)0, [](T a, T b) { return a + b; }); }
template <typename T> inline T simd_max(T x) { return halo_simd_reduce(x, x, [](T a, T b) { return a < b ? b : a; }); }
template <typename T> inline T simd_min(T x) { return halo_simd_reduce(x, x, [](T a, T b) { return b < a ? b : a; }); }

namespace metal {
// Metal's reinterpreting cast between types of one size.
template <typename T, typename U>
inline T as_type(U value) {
    return __builtin_bit_cast(T, value);
}
}  // namespace metal

// A binding's runtime array (`T _m0[1]` in the struct a `[[id(n)]]` member points to, rewritten
// by halo): each element is checked against the dispatch's bindings (binding_checks.c), so an
// index past a binding reads zero and writes nowhere, and the dispatch fails naming the access.
struct halo_binding {
    __SIZE_TYPE__ start, length;
};
extern "C" void halo_bindings_enter(const halo_binding* bindings, uint count);
extern "C" int halo_bindings_leave(__SIZE_TYPE__* stray);
extern "C" __SIZE_TYPE__ halo_binding_element(__SIZE_TYPE__ address, __SIZE_TYPE__ size);
template <typename T>
struct halo_binding_array {
    static_assert(sizeof(T) <= 256, "binding elements are at most 256 bytes on the emulated Metal device");
    T first;
    template <typename I>
    __global T& operator[](I index) __global {
        return *(__global T*)halo_binding_element(halo_element(index), sizeof(T));
    }
    template <typename I>
    const __global T& operator[](I index) const __global {
        return *(const __global T*)halo_binding_element(halo_element(index), sizeof(T));
    }
    template <typename I>
    __SIZE_TYPE__ halo_element(I index) const __global {
        return (__SIZE_TYPE__)this + (__SIZE_TYPE__)(__PTRDIFF_TYPE__)index * sizeof(T);
    }
};
