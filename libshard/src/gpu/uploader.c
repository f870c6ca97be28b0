/*
 * The last stage: host batches into a ring of device buffers (shard/gpu.h). The uploader's
 * handle, its upload thread (with a loader) or shard_uploader_put (without), and the
 * consumer's side; the ring's buffers and the queueing of an upload are ring.c's. The
 * DESIGN comment is in uploaderdef.h.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/error.h"
#include "base/thread.h"
#include "gpu/device.h"
#include "gpu/ring.h"
#include "gpu/jpegstage.h"
#include "gpu/uploaderdef.h"
#include "load/stats.h"

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

static void *upload_main(void *arg);

/* Starts the upload thread; under the mutex, or before it runs. */
static int start_thread(ShardUploader *u, char *msg)
{
    if (shard_thread_start(&u->thread, upload_main, u) != 0)
        return shard_fail(msg, SHARD_ERR_NOMEM, "uploader: cannot start its thread");
    u->has_thread = 1;
    return 0;
}

/* Stops the upload thread and waits for it. */
static void stop_thread(ShardUploader *u)
{
    pthread_mutex_lock(&u->mu);
    u->stop = 1;
    pthread_cond_broadcast(&u->cv);
    pthread_mutex_unlock(&u->mu);
    if (u->has_thread)
        pthread_join(u->thread, NULL);
    u->has_thread = 0;
}


/* The GPU's JPEG decoder for the loader's batches, as the setting asks: "auto" goes on
 * with the CPU alone where it cannot start, saying why; "gpu" fails. The context current. */
static int open_decoder(ShardUploader *u, char *msg)
{
    snprintf(u->decoder, sizeof u->decoder, "cpu");
    if (!u->loader || u->s.decoder == SHARD_DECODER_CPU)
        return 0;
    char why[SHARD_ERROR_MAX];
    int rc = shard_jpeg_stage_open(&u->jpeg, u->g, u->loader, u->s.decoder, u->s.batch_size, why);
    if (!rc) {
        snprintf(u->decoder, sizeof u->decoder, "%s", shard_jpeg_stage_name(u->jpeg));
        return 0;
    }
    if (u->s.decoder == SHARD_DECODER_GPU)
        return shard_fail(msg, rc, "uploader: decoder \"gpu\": %s", why);
    snprintf(u->decoder, sizeof u->decoder, "cpu: %s", why);
    return 0;
}

int shard_uploader_open(ShardUploader **out, ShardGpu *g, const ShardUploadSettings *s,
                        ShardLoader *loader, ShardError *err)
{
    char msg[SHARD_ERROR_MAX];
    *out = NULL;
    if (!g || !s)
        return shard_report(err, SHARD_ERR_INVALID, "uploader: no GPU or no settings");
    if (s->buffers < 1 || s->buffers > 64 || s->batch_size < 1 || s->height < 1 || s->width < 1 ||
        s->height > 16384 || s->width > 16384 || (unsigned)s->dtype > SHARD_GPU_BFLOAT16 ||
        (unsigned)s->decoder > SHARD_DECODER_GPU ||
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
    u->state_scratch = loader ? malloc(SHARD_READER_STATE_MAX) : NULL;
    int rc = u->slots && u->ready && (!loader || u->state_scratch)
                 ? 0
                 : shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    CUresult r = CUDA_SUCCESS;
    if (!rc && (r = shard_gpu_enter(g)) != CUDA_SUCCESS)
        rc = shard_cuda_fail(u->cu, r, msg, "uploader: the device's context");
    if (!rc) {
        if ((r = u->cu->StreamCreate(&u->copy, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS)
            rc = shard_cuda_fail(u->cu, r, msg, "uploader: cuStreamCreate");
        if (!rc && !(s->dtype == SHARD_GPU_UINT8 && s->layout == SHARD_LAYOUT_NHWC))
            rc = shard_ring_load_finish(u, msg);
        for (size_t i = 0; i < u->n && !rc; i++)
            rc = shard_ring_slot_init(u, &u->slots[i], msg);
        if (!rc)
            rc = open_decoder(u, msg);
        shard_gpu_leave(g);
    }
    if (!rc && loader)
        rc = start_thread(u, msg);
    if (rc) {
        shard_jpeg_stage_free(&u->jpeg);
        shard_ring_destroy(u);
        return shard_report(err, rc, msg);
    }
    *out = u;
    return 0;
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
        while (!u->stop && !(sl = shard_ring_take(u)))
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
            /* the loader's wait (shard_loader_set_wait, which the Python binding sets to
             * check for signals) passed with no batch: nothing taken, ask again */
            int retry = rc == SHARD_AGAIN && !u->stop;
            /* every host buffer is on its way to the GPU: wait for a copy to finish */
            if (!retry && rc == SHARD_ERR_STATE && u->host_out > 0 && !u->stop) {
                retry = 1;
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
            shard_ring_give_back(u, sl);
            int stopping = u->stop; /* a retry cut short by a rewind or free: no end */
            pthread_mutex_unlock(&u->mu);
            if (!stopping || rc == SHARD_EOS)
                end_with(u, rc, rc == SHARD_EOS ? "" : shard_loader_error(u->loader));
            break;
        }
        if ((rc = shard_ring_fits(&u->s, hb->size, hb->image_bytes, msg)) != 0) {
            pthread_mutex_lock(&u->mu); /* never copied: out of the buffer, or short */
            shard_batch_release(u->loader, hb);
            u->host_out--;
            shard_ring_give_back(u, sl);
            pthread_mutex_unlock(&u->mu);
            end_with(u, rc, msg);
            break;
        }
        if (shard_loader_state(u->loader, u->state_scratch, SHARD_READER_STATE_MAX) != 0)
            u->state_scratch[0] = 0;
        shard_ring_set_state(sl, u->state_scratch);
        rc = shard_ring_upload(u, sl, hb->images, hb->labels, hb->size, hb, msg);
        if (rc) { /* hb went back to the loader */
            pthread_mutex_lock(&u->mu);
            shard_ring_give_back(u, sl);
            pthread_mutex_unlock(&u->mu);
            end_with(u, rc, msg);
            break;
        }
        shard_ring_push_ready(u, sl);
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
    Slot *sl = over ? NULL : shard_ring_take(u);
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
    if (r != CUDA_SUCCESS) {
        rc = shard_cuda_fail(cu, r, msg, "uploader: the device's context");
    } else {
        if (sl->timed) /* the previous upload from this staging memory is done */
            cu->EventSynchronize(sl->copied);
        memcpy(sl->staging, images, n * u->in_bytes);
        shard_ring_set_state(sl, "");
        rc = shard_ring_upload(u, sl, sl->staging, labels, n, NULL, msg);
        shard_gpu_leave(u->g);
    }
    pthread_mutex_lock(&u->mu);
    u->st.put_seconds += shard_seconds() - t0;
    pthread_mutex_unlock(&u->mu);
    if (rc) {
        pthread_mutex_lock(&u->mu);
        shard_ring_give_back(u, sl);
        pthread_mutex_unlock(&u->mu);
        end_with(u, rc, msg);
        return shard_fail(u->err, rc, "%s", msg);
    }
    shard_ring_push_ready(u, sl);
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

int shard_uploader_rewind(ShardUploader *u)
{
    stop_thread(u);
    /* every queued copy and its callback done: the host batches not held are the loader's
     * again before the caller sets its epoch */
    if (shard_gpu_enter(u->g) == CUDA_SUCCESS) {
        u->cu->StreamSynchronize(u->copy);
        shard_gpu_leave(u->g);
    }
    pthread_mutex_lock(&u->mu);
    if (u->ended && u->end_rc != SHARD_EOS) {
        int rc = u->end_rc;
        snprintf(u->err, sizeof u->err, "%s", u->end_msg);
        pthread_mutex_unlock(&u->mu);
        return rc;
    }
    shard_ring_drop_ready(u);
    u->ended = u->end_rc = u->put_ended = u->stop = 0;
    u->end_msg[0] = 0;
    pthread_mutex_unlock(&u->mu);
    return 0;
}

int shard_uploader_next(ShardUploader *u, void *stream, const ShardDeviceBatch **out)
{
    *out = NULL;
    double t0 = shard_seconds();
    pthread_mutex_lock(&u->mu);
    if (u->loader && !u->has_thread && !u->ended) { /* the first batch after a rewind */
        char msg[SHARD_ERROR_MAX];
        int rc = start_thread(u, msg);
        if (rc) {
            snprintf(u->err, sizeof u->err, "%s", msg);
            pthread_mutex_unlock(&u->mu);
            return rc;
        }
    }
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
    if (rc) { /* the caller never gets it: the buffer is not lost to the ring for good */
        shard_device_batch_host_done(&sl->b);
        shard_device_batch_release(&sl->b, SHARD_STREAM_NONE);
        return rc;
    }
    *out = &sl->b;
    return 0;
}

int shard_device_batch_wait(const ShardDeviceBatch *b, void *stream)
{
    Slot *sl = (Slot *)b;
    ShardUploader *u = sl->u;
    if (stream == SHARD_STREAM_NONE)
        return 0;
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

void shard_device_batch_host_done(const ShardDeviceBatch *b) { shard_ring_host_done((Slot *)b); }

void shard_device_batch_release(const ShardDeviceBatch *b, void *stream)
{
    Slot *sl = (Slot *)b;
    ShardUploader *u = sl->u;
    ShardCuda *cu = u->cu;
    int entered = stream != SHARD_STREAM_NONE && shard_gpu_enter(u->g) == CUDA_SUCCESS;
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
    shard_ring_host_done(sl);
    pthread_mutex_lock(&u->mu);
    u->held--;
    shard_ring_give_back(u, sl);
    pthread_mutex_unlock(&u->mu);
    shard_ring_unref(u);
}

void shard_uploader_stats(const ShardUploader *cu, ShardUploadStats *out)
{
    ShardUploader *u = (ShardUploader *)cu; /* finished uploads' times are counted now */
    int entered = shard_gpu_enter(u->g) == CUDA_SUCCESS;
    pthread_mutex_lock(&u->mu);
    for (size_t i = 0; entered && i < u->n; i++)
        shard_ring_account(u, &u->slots[i]);
    *out = u->st;
    out->in_flight = u->busy;
    pthread_mutex_unlock(&u->mu);
    if (u->jpeg)
        shard_jpeg_stage_stats(u->jpeg, out);
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
    *up = (ShardStageStats){
        .name = "upload", .threads = 1, .items = dl->items, .bytes = us.bytes, .seconds = wall,
        .busy_seconds = wall - in - us.full_seconds, .wait_input_seconds = in,
        .wait_output_seconds = us.full_seconds, .queue_fill = (size_t)us.in_flight,
        .queue_capacity = us.buffers};
    *dl = (ShardStageStats){
        .name = "deliver", .threads = 1, .items = dl->items, .bytes = us.bytes, .seconds = wall,
        .busy_seconds = wall - us.wait_seconds, .wait_input_seconds = us.wait_seconds,
        .queue_fill = us.buffers - (size_t)us.in_flight, .queue_capacity = us.buffers};
    shard_stage_clamp(up);
    shard_stage_clamp(dl);
    shard_stats_judge(o);
}

const char *shard_uploader_error(const ShardUploader *u) { return u->err; }

const char *shard_uploader_decoder(const ShardUploader *u) { return u->decoder; }

void shard_uploader_free(ShardUploader **pu)
{
    if (!pu || !*pu)
        return;
    ShardUploader *u = *pu;
    *pu = NULL;
    stop_thread(u);
    if (shard_gpu_enter(u->g) == CUDA_SUCCESS) {
        u->cu->StreamSynchronize(u->copy); /* every queued copy and callback has run */
        shard_gpu_leave(u->g);
    }
    shard_jpeg_stage_free(&u->jpeg); /* the loader is no longer asked, before it may go */
    /* the loader may be freed next: every host batch goes back to it now */
    for (size_t i = 0; i < u->n; i++)
        shard_ring_host_done(&u->slots[i]);
    shard_ring_unref(u);
}
