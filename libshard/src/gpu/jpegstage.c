/*
 * The uploader's JPEG stage (jpegstage.h).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "decode/jpegkind.h"
#include "gpu/gpujpeg.h"
#include "gpu/jpegstage.h"
#include "gpu/split.h"
#include "load/defer.h"
#include "shard/decode.h"

struct ShardJpegStage {
    ShardLoader *loader;
    ShardGpuJpeg *dec;
    ShardSplit split;
    const ShardTransform *t; /* the loader's */
    ShardGpuJpegJob *jobs;
    size_t cap;
    /* the producer's counters, read by stats */
    atomic_ullong by_kind[SHARD_JPEG_KINDS], cpu_split;
    /* the upload thread's, read by stats from any thread */
    atomic_ullong gpu_decoded, cpu_decoded, retried;
    _Atomic double gpu_seconds;
    uint64_t cpu_items_seen; /* the decode threads' counters at the last observation */
    double cpu_busy_seen;
    char name[160];
    int hooked;
};

/* The producer's question, per sample with an image: the split first (no header read for
 * what it gives the CPU), then whether the GPU takes this JPEG. 0: taken; else the
 * JPEG's kind (jpegkind.h), or WHY_SPLIT. Counted when the batch is uploaded, not here:
 * the producer reads ahead, and batches it made may be made again. */
#define WHY_SPLIT 100

static int take(void *ctx, const unsigned char *data, size_t size)
{
    ShardJpegStage *j = ctx;
    if (!shard_split_take(&j->split))
        return WHY_SPLIT;
    int w, h;
    return (int)shard_jpeg_kind(data, size, j->t->max_pixels, &w, &h);
}

/* What the batch's samples were, as the producer's take() said. */
static void count(ShardJpegStage *j, const ShardBatch *host)
{
    for (size_t i = 0; host->gpu_why && i < host->size; i++) {
        int why = host->gpu_why[i];
        if (why == WHY_SPLIT)
            atomic_fetch_add(&j->cpu_split, 1);
        else if (why > 0 && why < SHARD_JPEG_KINDS)
            atomic_fetch_add(&j->by_kind[why], 1);
    }
}

int shard_jpeg_stage_open(ShardJpegStage **out, ShardGpu *g, ShardLoader *loader,
                          ShardDecoder decoder, size_t batch, char *msg)
{
    *out = NULL;
    ShardJpegStage *j = calloc(1, sizeof *j);
    if (!j)
        return shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    j->loader = loader;
    j->t = shard_loader_transform(loader);
    j->cap = batch;
    for (int k = 0; k < SHARD_JPEG_KINDS; k++)
        atomic_init(&j->by_kind[k], 0);
    atomic_init(&j->cpu_split, 0);
    atomic_init(&j->gpu_decoded, 0);
    atomic_init(&j->cpu_decoded, 0);
    atomic_init(&j->retried, 0);
    atomic_init(&j->gpu_seconds, 0.0);
    /* "auto" starts even and moves with the first measurements. SHARD_GPU_SHARE (0..1)
     * holds "auto" at a fixed share instead: for benchmarks that sweep the split. */
    const char *fixed = getenv("SHARD_GPU_SHARE");
    char *end = NULL;
    double share = fixed && *fixed ? strtod(fixed, &end) : -1;
    if (decoder == SHARD_DECODER_GPU)
        shard_split_init(&j->split, 1.0, 1);
    else if (end && !*end && share >= 0 && share <= 1)
        shard_split_init(&j->split, share, 1);
    else
        shard_split_init(&j->split, 0.5, 0);
    int rc = (j->jobs = calloc(batch, sizeof *j->jobs)) ? 0
                                                        : shard_fail(msg, SHARD_ERR_NOMEM,
                                                                     "out of memory");
    if (!rc)
        rc = shard_gpujpeg_open(&j->dec, g, j->t, batch, msg);
    if (rc) {
        free(j->jobs);
        free(j);
        return rc;
    }
    snprintf(j->name, sizeof j->name, "gpu (%s), %s", shard_gpujpeg_name(j->dec),
             decoder == SHARD_DECODER_GPU ? "every JPEG it takes"
             : j->split.fixed              ? "a fixed split (SHARD_GPU_SHARE)"
                                           : "auto split");
    int threads;
    shard_loader_decode_work(loader, &threads, &j->cpu_items_seen, &j->cpu_busy_seen);
    shard_loader_defer_from_here(loader, &(ShardDefer){take, j});
    j->hooked = 1;
    *out = j;
    return 0;
}

int shard_jpeg_stage_run(ShardJpegStage *j, CUstream s, CUdeviceptr raw, size_t image_bytes,
                         const ShardBatch *host, char *msg)
{
    count(j, host);
    size_t n = host->gpu_count;
    for (size_t m = 0; m < n; m++) {
        size_t i = host->gpu_index[m];
        j->jobs[m] = (ShardGpuJpegJob){host->gpu_data[m], host->gpu_size[m], host->seeds[i],
                                       raw + i * image_bytes, 0};
    }
    double secs = 0;
    int rc = n ? shard_gpujpeg_decode(j->dec, s, j->jobs, n, &secs, msg) : 0;
    if (rc)
        return rc;
    size_t good = 0;
    /* what the GPU failed, decoded by the CPU into the host batch and copied after */
    for (size_t m = 0; m < n; m++) {
        if (!j->jobs[m].failed) {
            good++;
            continue;
        }
        size_t i = host->gpu_index[m];
        unsigned char *dst = (unsigned char *)host->images + i * image_bytes;
        char why[SHARD_ERROR_MAX];
        if (shard_decode_transform(host->gpu_data[m], host->gpu_size[m], j->t, host->seeds[i],
                                   dst, why, sizeof why))
            return shard_fail(msg, SHARD_ERR_DECODE, "sample %s of %s: %s", host->keys[i],
                              host->urls[i] ? host->urls[i] : "?", why);
        atomic_fetch_add(&j->retried, 1);
        ShardCuda *cu = shard_gpujpeg_cuda(j->dec);
        CUresult r = cu->MemcpyHtoDAsync(raw + i * image_bytes, dst, image_bytes, s);
        if (r != CUDA_SUCCESS)
            return shard_cuda_fail(cu, r, msg, "GPU JPEG decode: a CPU retry's copy");
    }
    atomic_fetch_add(&j->gpu_decoded, good);
    atomic_fetch_add(&j->cpu_decoded, host->size - good);
    atomic_store(&j->gpu_seconds, atomic_load(&j->gpu_seconds) + secs); /* one writer */
    int threads;
    uint64_t items;
    double busy;
    shard_loader_decode_work(j->loader, &threads, &items, &busy);
    shard_split_observe(&j->split, (double)(items - j->cpu_items_seen), busy - j->cpu_busy_seen,
                        threads, (double)good, secs);
    j->cpu_items_seen = items;
    j->cpu_busy_seen = busy;
    return 0;
}

void shard_jpeg_stage_stats(ShardJpegStage *j, ShardUploadStats *st)
{
    st->gpu_decoded = atomic_load(&j->gpu_decoded);
    st->cpu_decoded = atomic_load(&j->cpu_decoded);
    st->gpu_retried = atomic_load(&j->retried);
    st->gpu_seconds = atomic_load(&j->gpu_seconds);
    st->gpu_share = shard_split_share(&j->split);
    st->cpu_split = atomic_load(&j->cpu_split);
    st->cpu_not_jpeg = atomic_load(&j->by_kind[SHARD_JPEG_NOT_JPEG]);
    st->cpu_progressive = atomic_load(&j->by_kind[SHARD_JPEG_PROGRESSIVE]);
    st->cpu_colour = atomic_load(&j->by_kind[SHARD_JPEG_COLOUR]);
    st->cpu_sampling = atomic_load(&j->by_kind[SHARD_JPEG_SAMPLING]);
    st->cpu_other = atomic_load(&j->by_kind[SHARD_JPEG_OTHER]);
}

const char *shard_jpeg_stage_name(const ShardJpegStage *j) { return j->name; }

void shard_jpeg_stage_free(ShardJpegStage **jp)
{
    ShardJpegStage *j = *jp;
    if (!j)
        return;
    *jp = NULL;
    /* batches made for the GPU and not taken are made again, decoded, for whoever reads the
     * loader next */
    if (j->hooked)
        shard_loader_defer_from_here(j->loader, NULL);
    shard_gpujpeg_free(&j->dec);
    free(j->jobs);
    free(j);
}
