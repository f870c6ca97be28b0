/*
 * What the finish kernels (finish.cu) take, by value: shared by nvcc's and the C
 * compiler's view of it, so only fixed-size fields.
 */
#ifndef SHARD_GPU_FINISH_H
#define SHARD_GPU_FINISH_H

typedef struct ShardFinishArgs {
    const unsigned char *in;  /* device: images of pixels x 3 bytes, NHWC */
    void *out;                /* device: the same pixels in the output type and layout */
    unsigned long long pixels; /* height x width */
    unsigned long long total;  /* images x pixels */
    int nchw;                 /* 1: channel planes; 0: NHWC */
    float scale[3], bias[3];  /* out = in * scale + bias (1 and 0 for uint8) */
} ShardFinishArgs;

#endif /* SHARD_GPU_FINISH_H */
