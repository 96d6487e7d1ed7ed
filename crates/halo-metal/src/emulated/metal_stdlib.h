// halo's stand-in for Metal's <metal_stdlib>, so that the MSL that SPIRV-Cross writes for IREE
// compiles as C++ for OpenCL (`clang -x clcpp`) into host code. C++ for OpenCL keeps address
// spaces distinct types (helpers overloaded on them stay distinct) and knows vector types with
// swizzles; everything here maps Metal's names onto it. Grown as kernels need more of Metal.
#pragma once

#define kernel
#define device __global
#define threadgroup __local
#define thread __private

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
#undef HALO_VECTORS

// Metal's math, elementwise on vectors. Declared here, as C++ for OpenCL's own library is left out.
#define HALO_UNARY(name, f)                                                     \
    inline float name(float a) { return f(a); }                                 \
    template <typename V> inline V name(V a) {                                  \
        V r;                                                                    \
        for (int i = 0; i < (int)(sizeof(V) / sizeof(a[0])); ++i) r[i] = f(a[i]); \
        return r;                                                               \
    }
HALO_UNARY(sqrt, __builtin_sqrtf)
HALO_UNARY(exp, __builtin_expf)
HALO_UNARY(log, __builtin_logf)
HALO_UNARY(fabs, __builtin_fabsf)
HALO_UNARY(floor, __builtin_floorf)
HALO_UNARY(ceil, __builtin_ceilf)
HALO_UNARY(tanh, __builtin_tanhf)
#undef HALO_UNARY

inline float fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
template <typename V>
inline V fma(V a, V b, V c) {
    V r;
    for (int i = 0; i < (int)(sizeof(V) / sizeof(a[0])); ++i) r[i] = __builtin_fmaf(a[i], b[i], c[i]);
    return r;
}
template <typename T>
inline T max(T a, T b) { return a < b ? b : a; }
template <typename T>
inline T min(T a, T b) { return b < a ? b : a; }

namespace metal {
// Metal's reinterpreting cast between types of one size.
template <typename T, typename U>
inline T as_type(U value) {
    return __builtin_bit_cast(T, value);
}
}  // namespace metal
