/*
 * The last stage: host batches into a ring of device buffers (shard/gpu.h).
 *
 * Each buffer of the ring (a Slot) is FREE, or BUSY: being uploaded, uploaded and waiting
 * in the ready queue, or held by the consumer. An upload is queued on the uploader's copy
 * stream: first a wait for the events the consumer's releases recorded (the GPU, not the
 * host, waits for the consumer's last kernel on the buffer), then the copies, the finish
 * kernel and the `ready` event that shard_uploader_next makes the consumer's stream wait
 * for. The host batch goes back to the loader from a host function queued after the copy,
 * once the consumer has also said it is done with the keys and fields (two references).
 *
 * Threads: the upload thread (with a loader) or the caller of shard_uploader_put fills
 * slots; the consumer takes and releases them, DLPack deleters release from any thread,
 * and the driver's callback thread gives host batches back. One mutex guards the ring; no
 * call that waits for the copy stream is made while holding it, since the host function
 * queued there takes it.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/error.h"
#include "gpu/finish.h"
#include "gpu/gpu.h"
#include "load/stats.h"

#ifdef SHARD_HAVE_KERNELS
#include "gpu/finish_fatbin.h" /* shard_finish_fatbin[]: finish.cu built by nvcc -fatbin */
#endif

#define MAX_RELEASES 8 /* streams whose work one buffer may wait for */

typedef struct Slot {
    ShardDeviceBatch b; /* first: a batch pointer is its slot */
    CUdeviceptr raw;    /* uint8 NHWC, the copy's target */
    CUdeviceptr out;    /* the finished images; raw itself without a finish kernel */
    CUdeviceptr labels;
    unsigned char *staging; /* pinned, for shard_uploader_put's images */
    int64_t *labstage;      /* pinned: the labels, copied here (a loader's are too small to
                               be pinned, see gpu.c) */
    CUevent start, copied, ready;
    CUevent freed[MAX_RELEASES];
    int nfreed;
    int timed;          /* start..ready recorded and not yet counted */
    int busy;
    int filling;        /* taken by the upload thread or put, not yet queued as ready */
    int holders;        /* the consumer's, from next to the last release */
    int queued_host;    /* host batch handed to the copy stream's callback */
    const ShardBatch *host;
    atomic_int host_refs;   /* the copy's and the consumer's */
    atomic_int host_done;   /* the consumer's reference is gone */
    struct ShardUploader *u;
    char state[160];
} Slot;

struct ShardUploader {
    ShardGpu *g;
    ShardCuda *cu;
    ShardUploadSettings s;
    ShardLoader *loader;
    CUstream copy;
    CUmodule mod;
    CUfunction finish; /* NULL: images stay as uploaded (uint8 NHWC) */
    size_t in_bytes, out_bytes;
    Slot *slots;
    size_t n;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t *ready; /* FIFO of slot numbers */
    size_t rhead, rcount;
    size_t next_slot;
    size_t busy, held, host_out;
    int ended, end_rc, stop, put_ended;
    pthread_t thread;
    int has_thread;
    atomic_int refs; /* the owner's, and one per held slot */
    ShardUploadStats st;
    char end_msg[SHARD_ERROR_MAX];
    char err[SHARD_ERROR_MAX];
};

void shard_upload_default_settings(ShardUploadSettings *s)
{
    memset(s, 0, sizeof *s);
    s->buffers = 3;
    s->batch_size = 256;
    s->height = s->width = 224;
    s->dtype = SHARD_GPU_UINT8;
    s->layout = SHARD_LAYOUT_NCHW;
    s->mean[0] = 0.485f, s->mean[1] = 0.456f, s->mean[2] = 0.406f;
    s->std[0] = 0.229f, s->std[1] = 0.224f, s->std[2] = 0.225f;
}

static size_t dtype_bytes(ShardGpuDType t)
{
    return t == SHARD_GPU_FLOAT32 ? 4 : t == SHARD_GPU_UINT8 ? 1 : 2;
}

/* ---- teardown ------------------------------------------------------------------------- */

static void destroy(ShardUploader *u)
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

static void unref(ShardUploader *u)
{
    if (atomic_fetch_sub(&u->refs, 1) == 1)
        destroy(u);
}

/* ---- host batches back to the loader -------------------------------------------------- */

static void host_unref(Slot *sl)
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
static void copied_cb(void *user) { host_unref(user); }

static void consumer_host_done(Slot *sl)
{
    if (sl->queued_host && !atomic_exchange(&sl->host_done, 1))
        host_unref(sl);
}

/* ---- opening -------------------------------------------------------------------------- */

static int slot_init(ShardUploader *u, Slot *sl, char *msg)
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
    sl->b.state = sl->state;
    return 0;
}

static int load_finish(ShardUploader *u, char *msg)
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

static void *upload_main(void *arg);

int shard_uploader_open(ShardUploader **out, ShardGpu *g, const ShardUploadSettings *s,
                        ShardLoader *loader, ShardError *err)
{
    char msg[SHARD_ERROR_MAX];
    *out = NULL;
    if (!g || !s)
        return shard_report(err, SHARD_ERR_INVALID, "uploader: no GPU or no settings");
    if (s->buffers < 1 || s->buffers > 64 || s->batch_size < 1 || s->height < 1 || s->width < 1 ||
        s->height > 16384 || s->width > 16384 || (unsigned)s->dtype > SHARD_GPU_BFLOAT16 ||
        (s->layout != SHARD_LAYOUT_NCHW && s->layout != SHARD_LAYOUT_NHWC)) {
        shard_fail(msg, SHARD_ERR_INVALID, "uploader: buffers %zu (1 to 64), batch_size %zu, "
                   "%dx%d, dtype %d, layout %d: not valid", s->buffers, s->batch_size,
                   s->width, s->height, (int)s->dtype, (int)s->layout);
        return shard_report(err, SHARD_ERR_INVALID, msg);
    }
    for (int c = 0; c < 3; c++)
        if (s->dtype != SHARD_GPU_UINT8 && !(s->std[c] > 0 || s->std[c] < 0))
            return shard_report(err, SHARD_ERR_INVALID, "uploader: std must not be 0");
    ShardUploader *u = calloc(1, sizeof *u);
    if (!u)
        return shard_report(err, SHARD_ERR_NOMEM, "out of memory");
    shard_gpu_ref(g);
    u->g = g;
    u->cu = &g->cu;
    u->s = *s;
    u->loader = loader;
    u->n = s->buffers;
    u->in_bytes = (size_t)s->height * (size_t)s->width * 3;
    u->out_bytes = u->in_bytes * dtype_bytes(s->dtype);
    atomic_init(&u->refs, 1);
    pthread_mutex_init(&u->mu, NULL);
    pthread_cond_init(&u->cv, NULL);
    u->st.buffers = u->n;
    u->slots = calloc(u->n, sizeof *u->slots);
    u->ready = calloc(u->n, sizeof *u->ready);
    int rc = u->slots && u->ready ? 0 : shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    CUresult r = CUDA_SUCCESS;
    if (!rc && (r = shard_gpu_enter(g)) != CUDA_SUCCESS)
        rc = shard_cuda_fail(u->cu, r, msg, "uploader: the device's context");
    if (!rc) {
        if ((r = u->cu->StreamCreate(&u->copy, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS)
            rc = shard_cuda_fail(u->cu, r, msg, "uploader: cuStreamCreate");
        if (!rc && !(s->dtype == SHARD_GPU_UINT8 && s->layout == SHARD_LAYOUT_NHWC))
            rc = load_finish(u, msg);
        for (size_t i = 0; i < u->n && !rc; i++)
            rc = slot_init(u, &u->slots[i], msg);
        shard_gpu_leave(g);
    }
    if (!rc && loader) {
        if (pthread_create(&u->thread, NULL, upload_main, u) != 0)
            rc = shard_fail(msg, SHARD_ERR_NOMEM, "uploader: cannot start its thread");
        else
            u->has_thread = 1;
    }
    if (rc) {
        destroy(u);
        return shard_report(err, rc, msg);
    }
    *out = u;
    return 0;
}

/* ---- uploading ------------------------------------------------------------------------ */

/* Adds a finished upload's GPU times to the counters, if its events have completed; under
 * the mutex, the context current. Slots being filled are left to their filler. */
static void account(ShardUploader *u, Slot *sl)
{
    ShardCuda *cu = u->cu;
    if (!sl->timed || sl->filling || cu->EventQuery(sl->ready) != CUDA_SUCCESS)
        return;
    float copy_ms = 0, finish_ms = 0;
    cu->EventElapsedTime(&copy_ms, sl->start, sl->copied);
    cu->EventElapsedTime(&finish_ms, sl->copied, sl->ready);
    sl->timed = 0;
    u->st.copy_seconds += copy_ms * 1e-3;
    u->st.finish_seconds += finish_ms * 1e-3;
}

/* Queues slot sl's upload on the copy stream; the context is current. labels may be NULL
 * (-1 each). */
static int upload(ShardUploader *u, Slot *sl, const void *images, const int64_t *labels,
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
        account(u, sl);
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
        for (int c = 0; c < 3; c++) { /* the CPU path's constants (decode.c, store) */
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
    if (r == CUDA_SUCCESS && host) {
        pthread_mutex_lock(&u->mu);
        sl->host = host;
        pthread_mutex_unlock(&u->mu);
        atomic_store(&sl->host_refs, 2);
        atomic_store(&sl->host_done, 0);
        sl->queued_host = 1;
        r = cu->LaunchHostFunc(u->copy, copied_cb, sl);
        if (r != CUDA_SUCCESS) { /* nothing queued: the host batch goes back now */
            sl->queued_host = 0;
            atomic_store(&sl->host_refs, 1);
            host_unref(sl);
        }
    }
    if (r != CUDA_SUCCESS)
        return shard_cuda_fail(cu, r, msg, "uploader: queueing a batch's upload");
    pthread_mutex_lock(&u->mu);
    sl->timed = 1;
    u->st.batches++;
    u->st.bytes += n * (u->in_bytes + sizeof(int64_t));
    pthread_mutex_unlock(&u->mu);
    sl->b.size = n;
    sl->b.images = (void *)(uintptr_t)sl->out;
    sl->b.labels = (int64_t *)(uintptr_t)sl->labels;
    sl->b.host = host;
    return 0;
}

/* A FREE slot, round robin, or NULL; under the mutex. */
static Slot *take_free(ShardUploader *u)
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
static void give_back(ShardUploader *u, Slot *sl)
{
    sl->busy = 0;
    sl->filling = 0;
    u->busy--;
    pthread_cond_broadcast(&u->cv);
}

static void push_ready(ShardUploader *u, Slot *sl)
{
    pthread_mutex_lock(&u->mu);
    sl->filling = 0;
    u->ready[(u->rhead + u->rcount++) % u->n] = (size_t)(sl - u->slots);
    pthread_cond_broadcast(&u->cv);
    pthread_mutex_unlock(&u->mu);
}

static void end_with(ShardUploader *u, int rc, const char *msg)
{
    pthread_mutex_lock(&u->mu);
    if (!u->ended) {
        u->ended = 1;
        u->end_rc = rc;
        snprintf(u->end_msg, sizeof u->end_msg, "%s", msg ? msg : "");
    }
    pthread_cond_broadcast(&u->cv);
    pthread_mutex_unlock(&u->mu);
}

static void *upload_main(void *arg)
{
    ShardUploader *u = arg;
    char msg[SHARD_ERROR_MAX];
    if (shard_gpu_enter(u->g) != CUDA_SUCCESS) {
        end_with(u, SHARD_ERR_NOCUDA, "uploader: the device's context on the upload thread");
        return NULL;
    }
    for (;;) {
        pthread_mutex_lock(&u->mu);
        Slot *sl = NULL;
        double t0 = shard_seconds();
        while (!u->stop && !(sl = take_free(u)))
            pthread_cond_wait(&u->cv, &u->mu);
        u->st.full_seconds += shard_seconds() - t0;
        pthread_mutex_unlock(&u->mu);
        if (!sl)
            break;
        const ShardBatch *hb = NULL;
        int rc;
        for (;;) {
            rc = shard_loader_next(u->loader, &hb);
            pthread_mutex_lock(&u->mu);
            /* every host buffer is on its way to the GPU: wait for a copy to finish */
            int retry = rc == SHARD_ERR_STATE && u->host_out > 0 && !u->stop;
            if (retry) {
                size_t out = u->host_out;
                while (u->host_out == out && !u->stop)
                    pthread_cond_wait(&u->cv, &u->mu);
            } else if (!rc) {
                u->host_out++;
            }
            pthread_mutex_unlock(&u->mu);
            if (!retry)
                break;
        }
        if (rc) {
            pthread_mutex_lock(&u->mu);
            give_back(u, sl);
            pthread_mutex_unlock(&u->mu);
            end_with(u, rc, rc == SHARD_EOS ? "" : shard_loader_error(u->loader));
            break;
        }
        if (shard_loader_state(u->loader, sl->state, sizeof sl->state) != 0)
            sl->state[0] = 0;
        rc = upload(u, sl, hb->images, hb->labels, hb->size, hb, msg);
        if (rc) {
            pthread_mutex_lock(&u->mu);
            give_back(u, sl);
            pthread_mutex_unlock(&u->mu);
            end_with(u, rc, msg);
            break;
        }
        push_ready(u, sl);
    }
    shard_gpu_leave(u->g);
    return NULL;
}

int shard_uploader_put(ShardUploader *u, const void *images, size_t n, const int64_t *labels)
{
    if (u->loader)
        return shard_fail(u->err, SHARD_ERR_STATE,
                          "uploader: batches come from its loader; put is for one without");
    if (!n || n > u->s.batch_size || !images)
        return shard_fail(u->err, SHARD_ERR_INVALID, "uploader: a batch of %zu images (1 to "
                          "%zu)", n, u->s.batch_size);
    double t0 = shard_seconds();
    pthread_mutex_lock(&u->mu);
    int over = u->ended || u->put_ended;
    Slot *sl = over ? NULL : take_free(u);
    pthread_mutex_unlock(&u->mu);
    if (!sl)
        return over ? shard_fail(u->err, SHARD_ERR_STATE, "uploader: put after its end")
                    : shard_fail(u->err, SHARD_ERR_STATE,
                                 "uploader: all %zu device buffers are uploaded or held: take "
                                 "(shard_uploader_next) and release batches before putting "
                                 "more, or raise buffers", u->n);
    ShardCuda *cu = u->cu;
    char msg[SHARD_ERROR_MAX];
    CUresult r = shard_gpu_enter(u->g);
    int rc = 0;
    size_t bs = u->s.batch_size;
    if (r == CUDA_SUCCESS && !sl->staging) {
        void *p = NULL;
        r = cu->MemHostAlloc(&p, bs * u->in_bytes, CU_MEMHOSTALLOC_PORTABLE);
        sl->staging = p;
    }
    if (r != CUDA_SUCCESS) {
        rc = shard_cuda_fail(cu, r, msg, "uploader: pinned staging memory");
    } else {
        if (sl->timed) /* the previous upload from this staging memory is done */
            cu->EventSynchronize(sl->copied);
        memcpy(sl->staging, images, n * u->in_bytes);
        sl->state[0] = 0;
        rc = upload(u, sl, sl->staging, labels, n, NULL, msg);
    }
    pthread_mutex_lock(&u->mu);
    u->st.put_seconds += shard_seconds() - t0;
    pthread_mutex_unlock(&u->mu);
    if (r == CUDA_SUCCESS)
        shard_gpu_leave(u->g);
    if (rc) {
        pthread_mutex_lock(&u->mu);
        give_back(u, sl);
        pthread_mutex_unlock(&u->mu);
        end_with(u, rc, msg);
        return shard_fail(u->err, rc, "%s", msg);
    }
    push_ready(u, sl);
    return 0;
}

int shard_uploader_put_end(ShardUploader *u)
{
    if (u->loader)
        return shard_fail(u->err, SHARD_ERR_STATE, "uploader: its loader says where it ends");
    pthread_mutex_lock(&u->mu);
    u->put_ended = 1;
    pthread_cond_broadcast(&u->cv);
    pthread_mutex_unlock(&u->mu);
    return 0;
}

/* ---- the consumer --------------------------------------------------------------------- */

int shard_uploader_next(ShardUploader *u, void *stream, const ShardDeviceBatch **out)
{
    *out = NULL;
    double t0 = shard_seconds();
    pthread_mutex_lock(&u->mu);
    while (!u->rcount && !u->ended && !u->put_ended && u->held < u->n)
        pthread_cond_wait(&u->cv, &u->mu);
    u->st.wait_seconds += shard_seconds() - t0;
    if (!u->rcount) {
        int rc = u->ended ? u->end_rc : u->put_ended ? SHARD_EOS : SHARD_ERR_STATE;
        if (u->ended && rc != SHARD_EOS)
            snprintf(u->err, sizeof u->err, "%s", u->end_msg);
        else if (rc == SHARD_ERR_STATE)
            shard_fail(u->err, rc, "uploader: all %zu device buffers are held: release "
                       "batches (drop the tensors), or raise buffers", u->n);
        pthread_mutex_unlock(&u->mu);
        return rc;
    }
    Slot *sl = &u->slots[u->ready[u->rhead]];
    u->rhead = (u->rhead + 1) % u->n;
    u->rcount--;
    sl->holders = 1;
    u->held++;
    atomic_fetch_add(&u->refs, 1);
    pthread_mutex_unlock(&u->mu);
    int rc = shard_device_batch_wait(&sl->b, stream);
    *out = &sl->b;
    return rc;
}

int shard_device_batch_wait(const ShardDeviceBatch *b, void *stream)
{
    Slot *sl = (Slot *)b;
    ShardUploader *u = sl->u;
    CUresult r = shard_gpu_enter(u->g);
    if (r == CUDA_SUCCESS) {
        r = u->cu->StreamWaitEvent((CUstream)stream, sl->ready, 0);
        shard_gpu_leave(u->g);
    }
    return r == CUDA_SUCCESS ? 0 : shard_cuda_fail(u->cu, r, u->err, "uploader: cuStreamWaitEvent");
}

void shard_device_batch_retain(const ShardDeviceBatch *b)
{
    ShardUploader *u = ((Slot *)b)->u;
    pthread_mutex_lock(&u->mu);
    ((Slot *)b)->holders++;
    pthread_mutex_unlock(&u->mu);
}

void shard_device_batch_host_done(const ShardDeviceBatch *b) { consumer_host_done((Slot *)b); }

void shard_device_batch_release(const ShardDeviceBatch *b, void *stream)
{
    Slot *sl = (Slot *)b;
    ShardUploader *u = sl->u;
    ShardCuda *cu = u->cu;
    int entered = stream && shard_gpu_enter(u->g) == CUDA_SUCCESS;
    if (entered) {
        pthread_mutex_lock(&u->mu);
        int recorded = sl->nfreed < MAX_RELEASES &&
                       cu->EventRecord(sl->freed[sl->nfreed], (CUstream)stream) == CUDA_SUCCESS;
        sl->nfreed += recorded;
        pthread_mutex_unlock(&u->mu);
        /* rare (more streams than events): the host waits instead, outside the mutex, which
         * the copy stream's host functions need before the stream can go on */
        if (!recorded)
            cu->StreamSynchronize((CUstream)stream);
        shard_gpu_leave(u->g);
    }
    pthread_mutex_lock(&u->mu);
    int last = --sl->holders == 0;
    pthread_mutex_unlock(&u->mu);
    if (!last)
        return;
    /* before the slot is free: once it is, the next upload's host batch is in it */
    consumer_host_done(sl);
    pthread_mutex_lock(&u->mu);
    u->held--;
    give_back(u, sl);
    pthread_mutex_unlock(&u->mu);
    unref(u);
}

void shard_uploader_stats(const ShardUploader *cu, ShardUploadStats *out)
{
    ShardUploader *u = (ShardUploader *)cu; /* finished uploads' times are counted now */
    int entered = shard_gpu_enter(u->g) == CUDA_SUCCESS;
    pthread_mutex_lock(&u->mu);
    for (size_t i = 0; entered && i < u->n; i++)
        account(u, &u->slots[i]);
    *out = u->st;
    out->in_flight = u->busy;
    pthread_mutex_unlock(&u->mu);
    if (entered)
        shard_gpu_leave(u->g);
}

void shard_uploader_loader_stats(const ShardUploader *u, ShardLoaderStats *o)
{
    memset(o, 0, sizeof *o);
    if (!u->loader)
        return;
    shard_loader_stats(u->loader, o); /* its caller, "deliver", is the upload thread */
    ShardUploadStats us;
    shard_uploader_stats(u, &us);
    ShardStageStats *up = &o->stages[SHARD_STAGE_UPLOAD], *dl = &o->stages[SHARD_STAGE_DELIVER];
    double wall = o->wall_seconds, in = dl->wait_input_seconds;
    double busy = wall - in - us.full_seconds;
    *up = (ShardStageStats){"upload", 1, dl->items, us.bytes, wall, busy > 0 ? busy : 0, in,
                            us.full_seconds, (size_t)us.in_flight, us.buffers};
    double mine = wall - us.wait_seconds;
    *dl = (ShardStageStats){"deliver", 1, dl->items, us.bytes, wall, mine > 0 ? mine : 0,
                            us.wait_seconds, 0, us.buffers - (size_t)us.in_flight, us.buffers};
    shard_stats_judge(o);
}

const char *shard_uploader_error(const ShardUploader *u) { return u->err; }

void shard_uploader_free(ShardUploader **pu)
{
    if (!pu || !*pu)
        return;
    ShardUploader *u = *pu;
    *pu = NULL;
    pthread_mutex_lock(&u->mu);
    u->stop = 1;
    pthread_cond_broadcast(&u->cv);
    pthread_mutex_unlock(&u->mu);
    if (u->has_thread)
        pthread_join(u->thread, NULL);
    if (shard_gpu_enter(u->g) == CUDA_SUCCESS) {
        u->cu->StreamSynchronize(u->copy); /* every queued copy and callback has run */
        shard_gpu_leave(u->g);
    }
    /* the loader may be freed next: every host batch goes back to it now */
    for (size_t i = 0; i < u->n; i++)
        consumer_host_done(&u->slots[i]);
    unref(u);
}
