/*
 * The GPU's JPEG decoder (gpujpeg.h): per batch, nvJPEG writes each image's planes into an
 * arena of device memory, then three kernels (jpeg.cu) make the batch's images from them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/error.h"
#include "gpu/device.h"
#include "gpu/gpujpeg.h"
#include "gpu/jpegargs.h"
#include "gpu/nvjpeg.h"
#ifdef SHARD_HAVE_KERNELS
#include "gpu/jpeg_fatbin.h" /* shard_jpeg_fatbin[]: jpeg.cu built by nvcc -fatbin */
#endif

/* The most the kernels shrink a crop by (their weights fit 64 taps); beyond, the CPU. */
#define MAX_SHRINK 30.0

struct ShardGpuJpeg {
    ShardGpu *g;
    ShardCuda *cu;
    ShardNvjpeg nj;
    nvjpegHandle_t h;
    nvjpegJpegState_t st;
    int format;    /* NVJPEG_OUTPUT_YUV, or RGBI where nvJPEG refused YUV */
    int init_n;    /* the batch size nvJPEG was initialized for (0: none) */
    const char *backend;
    ShardTransform t;
    size_t cap;    /* jobs */
    CUmodule mod;
    CUfunction rgb, hpass, vpass;
    CUdeviceptr arena, descs;
    size_t arena_size;
    ShardJpegImage *host;  /* pinned: the descriptors, copied to descs */
    const unsigned char **data;
    size_t *sizes, *which;
    nvjpegImage_t *planes;
    char name[96];
    uint64_t refused; /* batches nvJPEG refused (decoded on the CPU instead) */
    char last_refusal[48];
};

const char *shard_gpujpeg_name(const ShardGpuJpeg *d) { return d->name; }

ShardCuda *shard_gpujpeg_cuda(ShardGpuJpeg *d) { return d->cu; }

void shard_gpujpeg_free(ShardGpuJpeg **dp)
{
    ShardGpuJpeg *d = *dp;
    if (!d)
        return;
    *dp = NULL;
    ShardCuda *cu = d->cu;
    if (shard_gpu_enter(d->g) == CUDA_SUCCESS) {
        if (d->st)
            d->nj.JpegStateDestroy(d->st);
        if (d->h)
            d->nj.Destroy(d->h);
        if (d->arena)
            cu->MemFree(d->arena);
        if (d->descs)
            cu->MemFree(d->descs);
        if (d->host)
            cu->MemFreeHost(d->host);
        if (d->mod)
            cu->ModuleUnload(d->mod);
        shard_gpu_leave(d->g);
    }
    shard_nvjpeg_unload(&d->nj);
    free(d->data);
    free(d->sizes);
    free(d->which);
    free(d->planes);
    shard_gpu_unref(d->g);
    free(d);
}

int shard_gpujpeg_open(ShardGpuJpeg **out, ShardGpu *g, const ShardTransform *t, size_t batch,
                       char *msg)
{
    *out = NULL;
#ifndef SHARD_HAVE_KERNELS
    (void)g, (void)t, (void)batch;
    return shard_fail(msg, SHARD_ERR_UNSUPPORTED,
                      "the GPU's JPEG decoder needs its kernels, and this libshard was built "
                      "without the CUDA toolkit (nvcc)");
#else
    ShardGpuJpeg *d = calloc(1, sizeof *d);
    if (!d)
        return shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    shard_gpu_ref(g);
    d->g = g;
    d->cu = &g->cu;
    d->t = *t;
    d->cap = batch;
    d->format = NVJPEG_OUTPUT_YUV;
    int rc = shard_nvjpeg_load(&d->nj, getenv("SHARD_NVJPEG"), msg);
    ShardCuda *cu = d->cu;
    CUresult r = CUDA_SUCCESS;
    if (!rc) {
        d->data = calloc(batch, sizeof *d->data);
        d->sizes = calloc(batch, sizeof *d->sizes);
        d->which = calloc(batch, sizeof *d->which);
        d->planes = calloc(batch, sizeof *d->planes);
        if (!d->data || !d->sizes || !d->which || !d->planes)
            rc = shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    }
    if (!rc) {
        /* the JPEG engines where the GPU has them; nvJPEG's CUDA backend elsewhere */
        nvjpegStatus_t s = d->nj.CreateEx(NVJPEG_BACKEND_HARDWARE, NULL, NULL, 0, &d->h);
        d->backend = "hardware";
        if (s != NVJPEG_STATUS_SUCCESS) {
            d->h = NULL;
            s = d->nj.CreateEx(NVJPEG_BACKEND_GPU_HYBRID, NULL, NULL, 0, &d->h);
            d->backend = "CUDA";
        }
        if (s == NVJPEG_STATUS_SUCCESS)
            s = d->nj.JpegStateCreate(d->h, &d->st);
        if (s != NVJPEG_STATUS_SUCCESS)
            rc = shard_fail(msg, SHARD_ERR_NOCUDA, "nvJPEG (%s) could not start: %s", d->nj.path,
                            shard_nvjpeg_status(s));
        snprintf(d->name, sizeof d->name, "nvJPEG %d.%d.%d, %s", d->nj.version[0],
                 d->nj.version[1], d->nj.version[2], d->backend);
    }
    if (!rc) {
        r = cu->ModuleLoadData(&d->mod, shard_jpeg_fatbin);
        if (r == CUDA_SUCCESS)
            r = cu->ModuleGetFunction(&d->rgb, d->mod, "shard_jpeg_rgb");
        if (r == CUDA_SUCCESS)
            r = cu->ModuleGetFunction(&d->hpass, d->mod, "shard_jpeg_hpass");
        if (r == CUDA_SUCCESS)
            r = cu->ModuleGetFunction(&d->vpass, d->mod, "shard_jpeg_vpass");
        if (r == CUDA_SUCCESS)
            r = cu->MemHostAlloc((void **)&d->host, batch * sizeof *d->host,
                                 CU_MEMHOSTALLOC_PORTABLE);
        if (r == CUDA_SUCCESS)
            r = cu->MemAlloc(&d->descs, batch * sizeof *d->host);
        if (r != CUDA_SUCCESS)
            rc = shard_cuda_fail(cu, r, msg, "the GPU's JPEG decoder");
    }
    if (rc) {
        shard_gpujpeg_free(&d);
        return rc;
    }
    *out = d;
    return 0;
#endif
}

/* Resample.c's bounds for output position xx: its first input index and count. */
static void bounds(int in_size, float in0, float in1, int out_size, int xx, int *xmin, int *n)
{
    double scale = (double)(in1 - in0) / out_size;
    double support = scale < 1.0 ? 1.0 : scale;
    double center = in0 + (xx + 0.5) * scale;
    int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5);
    lo = lo < 0 ? 0 : lo;
    hi = hi > in_size ? in_size : hi;
    *xmin = lo;
    *n = hi - lo;
}

static size_t up256(size_t n) { return (n + 255) & ~(size_t)255; }

/* Job j's descriptor in *im, where the GPU takes it: the image's size and sampling, the
 * crop and mirror of its seed, the rows the vertical pass reads, its place in the batch.
 * @return the arena bytes it needs; 0 when the CPU is to decode it */
static size_t plan_image(const ShardGpuJpeg *d, const ShardGpuJpegJob *j, ShardJpegImage *im)
{
    int W = d->t.width, H = d->t.height;
    int comps = 0, css = -1, w[NVJPEG_MAX_COMPONENT] = {0}, h[NVJPEG_MAX_COMPONENT] = {0};
    if (d->nj.GetImageInfo(d->h, j->data, j->size, &comps, &css, w, h) ||
        !(css == NVJPEG_CSS_444 || css == NVJPEG_CSS_422 || css == NVJPEG_CSS_420 ||
          css == NVJPEG_CSS_GRAY) ||
        w[0] < 1 || h[0] < 1 || (uint64_t)w[0] * (uint64_t)h[0] > INT32_MAX)
        return 0;
    double box[4];
    int flip = 0;
    if (shard_transform_box(&d->t, w[0], h[0], j->seed, box, &flip) ||
        box[2] / W > MAX_SHRINK || box[3] / H > MAX_SHRINK)
        return 0;
    memset(im, 0, sizeof *im);
    im->w = w[0], im->h = h[0];
    im->cw = css == NVJPEG_CSS_GRAY ? 0 : w[1];
    im->ch = css == NVJPEG_CSS_GRAY ? 0 : h[1];
    im->css = css;
    for (int c = 0; c < 4; c++)
        im->box[c] = (float)box[c];
    im->flip = flip;
    int first, count, last, lcount;
    bounds(im->h, im->box[1], im->box[1] + im->box[3], H, 0, &first, &count);
    bounds(im->h, im->box[1], im->box[1] + im->box[3], H, H - 1, &last, &lcount);
    im->y0 = first;
    im->y1 = last + lcount;
    if (im->y1 <= im->y0)
        return 0;
    im->out = (unsigned char *)(uintptr_t)j->out;
    size_t pix = (size_t)im->w * im->h;
    /* planes (room for RGBI too), the converted image, the horizontal pass's rows */
    return up256(pix * 3) + up256(pix * 3) + up256((size_t)(im->y1 - im->y0) * W * 3);
}

/* The k images' places in the arena, for nvJPEG's planes and the kernels' buffers. */
static void lay_out(ShardGpuJpeg *d, size_t k)
{
    int W = d->t.width;
    size_t at = 0;
    for (size_t m = 0; m < k; m++) {
        ShardJpegImage *im = &d->host[m];
        size_t pix = (size_t)im->w * im->h;
        unsigned char *base = (unsigned char *)(uintptr_t)(d->arena + at);
        nvjpegImage_t *p = &d->planes[m];
        memset(p, 0, sizeof *p);
        if (d->format == NVJPEG_OUTPUT_RGBI) {
            p->channel[0] = base, p->pitch[0] = (size_t)im->w * 3;
            im->css = SHARD_JPEG_RGBI;
        } else {
            p->channel[0] = base, p->pitch[0] = (size_t)im->w;
            if (im->css != NVJPEG_CSS_GRAY) {
                p->channel[1] = base + pix, p->pitch[1] = (size_t)im->cw;
                p->channel[2] = base + pix + (size_t)im->cw * im->ch, p->pitch[2] = (size_t)im->cw;
            } else { /* unwritten for grey; given anyway, a decoder may check them */
                p->channel[1] = base + pix, p->pitch[1] = (size_t)im->w;
                p->channel[2] = base + 2 * pix, p->pitch[2] = (size_t)im->w;
            }
        }
        for (int c = 0; c < 3; c++) {
            im->plane[c] = p->channel[c];
            im->pitch[c] = (unsigned)p->pitch[c];
        }
        at += up256(pix * 3);
        im->rgb = (unsigned char *)(uintptr_t)(d->arena + at);
        at += up256(pix * 3);
        im->tmp = (unsigned char *)(uintptr_t)(d->arena + at);
        at += up256((size_t)(im->y1 - im->y0) * W * 3);
    }
}

int shard_gpujpeg_decode(ShardGpuJpeg *d, CUstream s, ShardGpuJpegJob *jobs, size_t n,
                         double *seconds, char *msg)
{
    double t0 = shard_seconds();
    ShardCuda *cu = d->cu;
    int W = d->t.width, H = d->t.height;
    size_t k = 0, need = 0;
    int maxpix = 0, maxrows = 0;
    /* what each image needs, and which the GPU takes */
    for (size_t i = 0; i < n && i < d->cap; i++) {
        jobs[i].failed = 1;
        size_t bytes = plan_image(d, &jobs[i], &d->host[k]);
        if (!bytes)
            continue;
        const ShardJpegImage *im = &d->host[k];
        need += bytes;
        maxpix = im->w * im->h > maxpix ? im->w * im->h : maxpix;
        maxrows = im->y1 - im->y0 > maxrows ? im->y1 - im->y0 : maxrows;
        d->which[k] = i;
        d->data[k] = jobs[i].data;
        d->sizes[k] = jobs[i].size;
        k++;
    }
    if (!k) {
        *seconds = shard_seconds() - t0;
        return 0;
    }
    CUresult r = CUDA_SUCCESS;
    if (need > d->arena_size) { /* grow-only; the last call's work is done (it waited) */
        if (d->arena)
            cu->MemFree(d->arena);
        d->arena = 0;
        d->arena_size = 0;
        if ((r = cu->MemAlloc(&d->arena, need + need / 4)) != CUDA_SUCCESS)
            return shard_cuda_fail(cu, r, msg, "GPU JPEG decode: the decode arena");
        d->arena_size = need + need / 4;
    }
    lay_out(d, k);
    nvjpegStatus_t ns = NVJPEG_STATUS_SUCCESS;
    if (d->init_n != (int)k)
        ns = d->nj.DecodeBatchedInitialize(d->h, d->st, (int)k, 1, d->format);
    if (ns == NVJPEG_STATUS_SUCCESS)
        ns = d->nj.DecodeBatched(d->h, d->st, d->data, d->sizes, d->planes, s);
    d->init_n = ns == NVJPEG_STATUS_SUCCESS ? (int)k : 0;
    if (ns != NVJPEG_STATUS_SUCCESS) {
        /* a batch refused: nvJPEG does not say which image, so the CPU takes them all; a
         * decoder that refuses planar YUV as such is asked for RGB from the next batch on */
        cu->StreamSynchronize(s);
        if (d->format == NVJPEG_OUTPUT_YUV && (ns == NVJPEG_STATUS_INVALID_PARAMETER ||
                                               ns == NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED))
            d->format = NVJPEG_OUTPUT_RGBI;
        d->refused++;
        snprintf(d->last_refusal, sizeof d->last_refusal, "%s", shard_nvjpeg_status(ns));
        *seconds = shard_seconds() - t0;
        return 0;
    }
    ShardJpegArgs a = {.images = (const ShardJpegImage *)(uintptr_t)d->descs,
                       .out_w = W, .out_h = H, .rows = maxrows, .pixels = maxpix};
    void *params[] = {&a};
    unsigned th = 256;
    r = cu->MemcpyHtoDAsync(d->descs, d->host, k * sizeof *d->host, s);
    if (r == CUDA_SUCCESS)
        r = cu->LaunchKernel(d->rgb, (unsigned)(((size_t)maxpix + th - 1) / th), (unsigned)k, 1,
                             th, 1, 1, 0, s, params, NULL);
    if (r == CUDA_SUCCESS)
        r = cu->LaunchKernel(d->hpass, (unsigned)(((size_t)maxrows * W + th - 1) / th),
                             (unsigned)k, 1, th, 1, 1, 0, s, params, NULL);
    if (r == CUDA_SUCCESS)
        r = cu->LaunchKernel(d->vpass, (unsigned)(((size_t)H * W + th - 1) / th), (unsigned)k, 1,
                             th, 1, 1, 0, s, params, NULL);
    if (r == CUDA_SUCCESS)
        r = cu->StreamSynchronize(s);
    if (r != CUDA_SUCCESS)
        return shard_cuda_fail(cu, r, msg, "GPU JPEG decode: the colour, crop and resize kernels");
    for (size_t m = 0; m < k; m++)
        jobs[d->which[m]].failed = 0;
    *seconds = shard_seconds() - t0;
    return 0;
}
