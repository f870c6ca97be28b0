/*
 * The on-GPU finish of an uploaded batch, in one pass: uint8 NHWC as the decoders wrote it
 * -> uint8, float32, float16 or bfloat16, normalized by mean and std, in NCHW or NHWC.
 * Built by nvcc into a fatbinary that the library carries (finish_fatbin.h, included by
 * ring.c) and loads with cuModuleLoadData: no CUDA runtime is linked. The arithmetic is the
 * CPU path's (decode/transform.c, store): value * scale + bias in float32, rounded at each step as
 * there, so float32 batches equal the CPU's.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gpu/finish.h"

template <typename T> __device__ inline T convert(float v);
template <> __device__ inline float convert<float>(float v) { return v; }
template <> __device__ inline __half convert<__half>(float v) { return __float2half_rn(v); }
template <> __device__ inline __nv_bfloat16 convert<__nv_bfloat16>(float v)
{
    return __float2bfloat16_rn(v);
}

template <typename T> __device__ inline void finish_pixel(const ShardFinishArgs &a, T *out)
{
    unsigned long long p = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (p >= a.total)
        return;
    unsigned long long img = p / a.pixels, q = p - img * a.pixels;
    const unsigned char *in = a.in + p * 3;
    for (int c = 0; c < 3; c++) {
        unsigned long long o = a.nchw ? (img * 3 + c) * a.pixels + q : p * 3 + c;
        float v = __fadd_rn(__fmul_rn((float)in[c], a.scale[c]), a.bias[c]);
        out[o] = convert<T>(v);
    }
}

extern "C" __global__ void shard_finish_u8(ShardFinishArgs a)
{
    unsigned long long p = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (p >= a.total)
        return;
    unsigned long long img = p / a.pixels, q = p - img * a.pixels;
    unsigned char *out = (unsigned char *)a.out;
    for (int c = 0; c < 3; c++)
        out[a.nchw ? (img * 3 + c) * a.pixels + q : p * 3 + c] = a.in[p * 3 + c];
}

extern "C" __global__ void shard_finish_f32(ShardFinishArgs a) { finish_pixel(a, (float *)a.out); }

extern "C" __global__ void shard_finish_f16(ShardFinishArgs a) { finish_pixel(a, (__half *)a.out); }

extern "C" __global__ void shard_finish_bf16(ShardFinishArgs a)
{
    finish_pixel(a, (__nv_bfloat16 *)a.out);
}
