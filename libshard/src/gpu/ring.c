/*
 * The uploader's ring of device buffers (ring.h). The DESIGN comment is in uploaderdef.h.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "gpu/finish.h"
#include "gpu/device.h"
#include "gpu/ring.h"
#include "gpu/jpegstage.h"
#include "gpu/uploaderdef.h"

#ifdef SHARD_HAVE_KERNELS
#include "gpu/finish_fatbin.h" /* shard_finish_fatbin[]: finish.cu built by nvcc -fatbin */
#endif

void shard_ring_destroy(ShardUploader *u)
{
    ShardCuda *cu = u->cu;
    int entered = shard_gpu_enter(u->g) == CUDA_SUCCESS;
    for (size_t i = 0; u->slots && i < u->n && entered; i++) {
        Slot *sl = &u->slots[i];
        for (int k = 0; k < sl->nfreed; k++)
            cu->EventSynchronize(sl->freed[k]); /* the consumer's last reads are done */
        for (int k = 0; k < MAX_RELEASES; k++)
            if (sl->freed[k])
                cu->EventDestroy(sl->freed[k]);
        CUevent ev[3] = {sl->start, sl->copied, sl->ready};
        for (int k = 0; k < 3; k++)
            if (ev[k])
                cu->EventDestroy(ev[k]);
        if (sl->out && sl->out != sl->raw)
            cu->MemFree(sl->out);
        if (sl->raw)
            cu->MemFree(sl->raw);
        if (sl->labels)
            cu->MemFree(sl->labels);
        if (sl->staging)
            cu->MemFreeHost(sl->staging);
        if (sl->labstage)
            cu->MemFreeHost(sl->labstage);
    }
    for (size_t i = 0; u->slots && i < u->n; i++)
        free(u->slots[i].state);
    free(u->state_scratch);
    if (entered) {
        if (u->copy)
            cu->StreamDestroy(u->copy);
        if (u->mod)
            cu->ModuleUnload(u->mod);
        shard_gpu_leave(u->g);
    }
    pthread_mutex_destroy(&u->mu);
    pthread_cond_destroy(&u->cv);
    free(u->slots);
    free(u->ready);
    shard_gpu_unref(u->g);
    free(u);
}

void shard_ring_unref(ShardUploader *u)
{
    if (atomic_fetch_sub(&u->refs, 1) == 1)
        shard_ring_destroy(u);
}

void shard_ring_host_unref(Slot *sl)
{
    if (atomic_fetch_sub(&sl->host_refs, 1) != 1)
        return;
    ShardUploader *u = sl->u;
    pthread_mutex_lock(&u->mu); /* the slot's next filler waits for host to be NULL */
    if (sl->host)
        shard_batch_release(u->loader, sl->host);
    sl->host = NULL;
    u->host_out--;
    pthread_cond_broadcast(&u->cv);
    pthread_mutex_unlock(&u->mu);
}

/* On the driver's callback thread, after the copy read the host batch: no CUDA calls. */
static void copied_cb(void *user) { shard_ring_host_unref(user); }

void shard_ring_host_done(Slot *sl)
{
    if (sl->queued_host && !atomic_exchange(&sl->host_done, 1))
        shard_ring_host_unref(sl);
}

int shard_ring_slot_init(ShardUploader *u, Slot *sl, char *msg)
{
    ShardCuda *cu = u->cu;
    size_t bs = u->s.batch_size;
    CUresult r;
    sl->u = u;
    atomic_init(&sl->host_refs, 0);
    atomic_init(&sl->host_done, 1);
    if ((r = cu->MemAlloc(&sl->raw, bs * u->in_bytes)) != CUDA_SUCCESS ||
        (u->finish && (r = cu->MemAlloc(&sl->out, bs * u->out_bytes)) != CUDA_SUCCESS) ||
        (r = cu->MemAlloc(&sl->labels, bs * sizeof(int64_t))) != CUDA_SUCCESS) {
        char what[160];
        snprintf(what, sizeof what, "uploader: %zu device buffers of %zu images of %dx%d",
                 u->n, bs, u->s.width, u->s.height);
        return shard_cuda_fail(cu, r, msg, what);
    }
    if (!u->finish)
        sl->out = sl->raw;
    void *lab = NULL;
    if ((r = cu->MemHostAlloc(&lab, bs * sizeof(int64_t), CU_MEMHOSTALLOC_PORTABLE)) !=
        CUDA_SUCCESS)
        return shard_cuda_fail(cu, r, msg, "uploader: pinned memory for labels");
    sl->labstage = lab;
    if ((r = cu->EventCreate(&sl->start, 0)) != CUDA_SUCCESS ||
        (r = cu->EventCreate(&sl->copied, 0)) != CUDA_SUCCESS ||
        (r = cu->EventCreate(&sl->ready, 0)) != CUDA_SUCCESS)
        return shard_cuda_fail(cu, r, msg, "uploader: cuEventCreate");
    for (int k = 0; k < MAX_RELEASES; k++)
        if ((r = cu->EventCreate(&sl->freed[k], CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS)
            return shard_cuda_fail(cu, r, msg, "uploader: cuEventCreate");
    sl->b.image_bytes = u->out_bytes;
    sl->b.height = u->s.height;
    sl->b.width = u->s.width;
    sl->b.dtype = u->s.dtype;
    sl->b.layout = u->s.layout;
    sl->b.device = u->g->ordinal;
    if (!u->loader) { /* put's staging: at open, not on a buffer's first use mid-training */
        void *p = NULL;
        if ((r = cu->MemHostAlloc(&p, bs * u->in_bytes, CU_MEMHOSTALLOC_PORTABLE)) !=
            CUDA_SUCCESS)
            return shard_cuda_fail(cu, r, msg, "uploader: pinned staging memory");
        sl->staging = p;
    }
    if (!(sl->state = calloc(1, 1)))
        return shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    sl->state_cap = 1;
    sl->b.state = sl->state;
    return 0;
}

int shard_ring_fits(const ShardUploadSettings *s, size_t n, size_t image_bytes, char *msg)
{
    size_t want = (size_t)s->height * (size_t)s->width * 3;
    if (n >= 1 && n <= s->batch_size && image_bytes == want)
        return 0;
    return shard_fail(msg, SHARD_ERR_INVALID,
                      "uploader: a host batch of %zu images of %zu bytes, for a ring of at most "
                      "%zu images of %dx%d uint8 RGB (%zu bytes each): give the loader the "
                      "uploader's batch_size and image size", n, image_bytes, s->batch_size,
                      s->width, s->height, want);
}

void shard_ring_set_state(Slot *sl, const char *state)
{
    size_t n = strlen(state) + 1;
    if (n > sl->state_cap) {
        char *p = realloc(sl->state, n);
        if (!p) { /* out of memory: no state rather than a wrong one */
            sl->state[0] = 0;
            return;
        }
        sl->state = p;
        sl->state_cap = n;
        sl->b.state = p;
    }
    memcpy(sl->state, state, n);
}

int shard_ring_load_finish(ShardUploader *u, char *msg)
{
    static const char *const names[] = {"shard_finish_u8", "shard_finish_f32", "shard_finish_f16",
                                        "shard_finish_bf16"};
#ifdef SHARD_HAVE_KERNELS
    CUresult r = u->cu->ModuleLoadData(&u->mod, shard_finish_fatbin);
    if (r == CUDA_SUCCESS)
        r = u->cu->ModuleGetFunction(&u->finish, u->mod, names[u->s.dtype]);
    return r == CUDA_SUCCESS ? 0 : shard_cuda_fail(u->cu, r, msg, "uploader: the finish kernels");
#else
    return shard_fail(msg, SHARD_ERR_UNSUPPORTED,
                      "uploader: %s %s on the GPU needs the finish kernels, and this libshard "
                      "was built without the CUDA toolkit (nvcc): rebuild with it, or take "
                      "uint8 NHWC batches", names[u->s.dtype] + 13,
                      u->s.layout == SHARD_LAYOUT_NCHW ? "NCHW" : "NHWC");
#endif
}

/* Adds a finished upload's GPU times to the counters, if its events have completed; under
 * the mutex, the context current. Slots being filled are left to their filler. */
void shard_ring_account(ShardUploader *u, Slot *sl)
{
    ShardCuda *cu = u->cu;
    if (!sl->timed || sl->filling || cu->EventQuery(sl->ready) != CUDA_SUCCESS)
        return;
    float copy_ms = 0, finish_ms = 0;
    cu->EventElapsedTime(&copy_ms, sl->start, sl->copied);
    cu->EventElapsedTime(&finish_ms, sl->copied, sl->ready);
    sl->timed = 0;
    u->st.bytes += sl->bytes; /* with its time: a copy still running counts neither */
    u->st.copy_seconds += copy_ms * 1e-3;
    u->st.finish_seconds += finish_ms * 1e-3;
}

/* Queues slot sl's upload on the copy stream; the context is current. labels may be NULL
 * (-1 each). */
int shard_ring_upload(ShardUploader *u, Slot *sl, const void *images, const int64_t *labels,
                  size_t n, const ShardBatch *host, char *msg)
{
    ShardCuda *cu = u->cu;
    CUresult r = CUDA_SUCCESS;
    if (sl->queued_host) { /* the last use's callback may still be to come: it is that
                              use's, and must not count against this one */
        pthread_mutex_lock(&u->mu);
        while (sl->host)
            pthread_cond_wait(&u->cv, &u->mu);
        pthread_mutex_unlock(&u->mu);
    }
    if (sl->timed) { /* the last use's times, long done */
        cu->EventSynchronize(sl->ready);
        pthread_mutex_lock(&u->mu);
        sl->filling = 0;
        shard_ring_account(u, sl);
        sl->filling = 1;
        pthread_mutex_unlock(&u->mu);
    }
    for (int k = 0; k < sl->nfreed && r == CUDA_SUCCESS; k++)
        r = cu->StreamWaitEvent(u->copy, sl->freed[k], 0);
    sl->nfreed = 0;
    for (size_t i = 0; i < n; i++) /* the last copy from labstage is done (ready, above) */
        sl->labstage[i] = labels ? labels[i] : -1;
    if (r == CUDA_SUCCESS)
        r = cu->EventRecord(sl->start, u->copy);
    if (r == CUDA_SUCCESS)
        r = cu->MemcpyHtoDAsync(sl->raw, images, n * u->in_bytes, u->copy);
    /* the GPU's samples over their places, after the copy (it carried nothing for them) */
    int rc = 0;
    if (r == CUDA_SUCCESS && host && u->jpeg &&
        (rc = shard_jpeg_stage_run(u->jpeg, u->copy, sl->raw, u->in_bytes, host, msg))) {
        pthread_mutex_lock(&u->mu);
        shard_batch_release(u->loader, host); /* nothing will read it: back to the loader */
        u->host_out--;
        pthread_cond_broadcast(&u->cv);
        pthread_mutex_unlock(&u->mu);
        return rc;
    }
    if (r == CUDA_SUCCESS)
        r = cu->MemcpyHtoDAsync(sl->labels, sl->labstage, n * sizeof *labels, u->copy);
    if (r == CUDA_SUCCESS)
        r = cu->EventRecord(sl->copied, u->copy);
    if (r == CUDA_SUCCESS && u->finish) {
        ShardFinishArgs a = {.in = (const unsigned char *)(uintptr_t)sl->raw,
                             .out = (void *)(uintptr_t)sl->out,
                             .pixels = (unsigned long long)u->s.height * (unsigned)u->s.width,
                             .nchw = u->s.layout == SHARD_LAYOUT_NCHW};
        a.total = a.pixels * n;
        for (int c = 0; c < 3; c++) { /* the CPU path's constants (decode/transform.c, store) */
            int f = u->s.dtype != SHARD_GPU_UINT8;
            a.scale[c] = f ? 1.0f / (255.0f * u->s.std[c]) : 1.0f;
            a.bias[c] = f ? -u->s.mean[c] / u->s.std[c] : 0.0f;
        }
        void *params[] = {&a};
        unsigned threads = 256, blocks = (unsigned)((a.total + threads - 1) / threads);
        r = cu->LaunchKernel(u->finish, blocks, 1, 1, threads, 1, 1, 0, u->copy, params, NULL);
    }
    if (r == CUDA_SUCCESS)
        r = cu->EventRecord(sl->ready, u->copy);
    sl->queued_host = 0;
    int attached = 0;
    if (r == CUDA_SUCCESS && host) {
        pthread_mutex_lock(&u->mu);
        sl->host = host;
        pthread_mutex_unlock(&u->mu);
        attached = 1;
        atomic_store(&sl->host_refs, 2);
        atomic_store(&sl->host_done, 0);
        sl->queued_host = 1;
        r = cu->LaunchHostFunc(u->copy, copied_cb, sl);
        if (r != CUDA_SUCCESS) { /* nothing queued: the host batch goes back now */
            sl->queued_host = 0;
            atomic_store(&sl->host_refs, 1);
            shard_ring_host_unref(sl);
        }
    }
    if (r != CUDA_SUCCESS) {
        if (host && !attached) { /* nothing will read it: back to the loader now */
            pthread_mutex_lock(&u->mu);
            shard_batch_release(u->loader, host);
            u->host_out--;
            pthread_cond_broadcast(&u->cv);
            pthread_mutex_unlock(&u->mu);
        }
        return shard_cuda_fail(cu, r, msg, "uploader: queueing a batch's upload");
    }
    pthread_mutex_lock(&u->mu);
    sl->timed = 1;
    sl->bytes = n * (u->in_bytes + sizeof(int64_t));
    u->st.batches++;
    pthread_mutex_unlock(&u->mu);
    sl->b.size = n;
    sl->b.images = (void *)(uintptr_t)sl->out;
    sl->b.labels = (int64_t *)(uintptr_t)sl->labels;
    sl->b.host = host;
    return 0;
}

/* A FREE slot, round robin, or NULL; under the mutex. */
Slot *shard_ring_take(ShardUploader *u)
{
    for (size_t k = 0; k < u->n; k++) {
        size_t i = (u->next_slot + k) % u->n;
        if (!u->slots[i].busy) {
            u->next_slot = i + 1;
            u->slots[i].busy = 1;
            u->slots[i].filling = 1;
            if (++u->busy > u->st.max_in_flight)
                u->st.max_in_flight = u->busy;
            return &u->slots[i];
        }
    }
    return NULL;
}

/* Under the mutex. */
void shard_ring_give_back(ShardUploader *u, Slot *sl)
{
    sl->busy = 0;
    sl->filling = 0;
    u->busy--;
    pthread_cond_broadcast(&u->cv);
}

void shard_ring_push_ready(ShardUploader *u, Slot *sl)
{
    pthread_mutex_lock(&u->mu);
    sl->filling = 0;
    u->ready[(u->rhead + u->rcount++) % u->n] = (size_t)(sl - u->slots);
    pthread_cond_broadcast(&u->cv);
    pthread_mutex_unlock(&u->mu);
}

void shard_ring_drop_ready(ShardUploader *u)
{
    while (u->rcount) {
        Slot *sl = &u->slots[u->ready[u->rhead]];
        u->rhead = (u->rhead + 1) % u->n;
        u->rcount--;
        /* the consumer's reference to the host batch; the copy's goes at its callback */
        if (sl->queued_host && !atomic_exchange(&sl->host_done, 1)) {
            pthread_mutex_unlock(&u->mu);
            shard_ring_host_unref(sl);
            pthread_mutex_lock(&u->mu);
        }
        shard_ring_give_back(u, sl);
    }
}
