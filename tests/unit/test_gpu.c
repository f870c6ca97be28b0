/* The GPU path from C. Everywhere: asking for a GPU where there is none fails with
 * SHARD_ERR_NOCUDA and says why, and the build carries the finish kernels when nvcc was
 * there. Where a GPU is (skipped, saying so, elsewhere): uploaded batches equal the CPU
 * loader's byte for byte (uint8) and value for value (float32 normalized on the GPU), put
 * batches come back as given, a full ring says so instead of waiting forever, and freeing
 * with batches uploading and held is clean, the held ones staying valid. The driver is
 * opened here too, only to copy device memory back for comparison. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <shard/shard.h>

#include "testjpeg.h"
#include "testshard.h"

static char *dir;
static char *manifest;
static void setup(void) { dir = tu_mkdtemp(); }
static void teardown(void)
{
    tu_rmtree(dir);
    free(dir);
    free(manifest);
    manifest = NULL;
}
TestSuite(gpu, .init = setup, .fini = teardown, .timeout = 120);

#define NSAMPLES 45

static void coloured(int x, int y, int w, int h, int seed, unsigned char rgb[3])
{
    (void)w, (void)h;
    rgb[0] = (unsigned char)(seed * 37);
    rgb[1] = (unsigned char)(x * 4 + y);
    rgb[2] = (unsigned char)(200 - seed * 3);
}

static const char *make_shards(void)
{
    TuSet t;
    tu_set_open(&t, dir, "g", ".tar", 16);
    for (int i = 0; i < NSAMPLES; i++) {
        char key[32], cls[8];
        snprintf(key, sizeof key, "k%04d", i);
        snprintf(cls, sizeof cls, "%d", i % 7);
        unsigned long size;
        unsigned char *img = tu_jpeg(40 + i % 7, 30 + i % 5, coloured, i, &size);
        ShardField f[] = {{"jpg", img, size}, {"cls", cls, strlen(cls)}};
        tu_set_add(&t, key, f, 2);
        free(img);
    }
    return manifest = tu_set_finish(&t);
}

static void loader_settings(ShardLoaderSettings *s, const char **urls, ShardDType dtype,
                            ShardLayout layout)
{
    shard_loader_default_settings(s);
    s->reader.urls = urls;
    s->reader.nurls = 1;
    s->reader.seed = 5;
    s->reader.have_seed = 1;
    s->reader.shuffle_buffer = 10;
    s->batch_size = 8;
    s->threads = 2;
    s->batches = 5;
    s->transform.width = 20;
    s->transform.height = 12;
    s->transform.flip = 1;
    s->transform.dtype = dtype;
    s->transform.layout = layout;
}

/* An uploader taking loader_settings' batches. */
static ShardUploader *uploader_for(ShardGpu *g, ShardLoader *l, ShardGpuDType dtype,
                                   ShardLayout layout)
{
    ShardUploadSettings us;
    shard_upload_default_settings(&us);
    us.decoder = SHARD_DECODER_CPU; /* exact: the GPU decodes alike, not bit for bit */
    us.batch_size = 8;
    us.height = 12;
    us.width = 20;
    us.dtype = dtype;
    us.layout = layout;
    ShardUploader *u;
    ShardError err;
    cr_assert_eq(shard_uploader_open(&u, g, &us, l, &err), 0, "%s", err.message);
    return u;
}

/* ---- the driver, for copying back ----------------------------------------------------- */

typedef int (*Fn)();
static void *cuda_lib;

static Fn sym(const char *name)
{
    Fn f = (Fn)dlsym(cuda_lib, name);
    cr_assert(f, "libcuda.so.1 lacks %s", name);
    return f;
}

/* Device to host on the legacy default stream, which next() made wait for the upload. */
static void dtoh(void *dst, const void *src, size_t n)
{
    void *ctx;
    int dev;
    cr_assert_eq(sym("cuDeviceGet")(&dev, 0), 0);
    cr_assert_eq(sym("cuDevicePrimaryCtxRetain")(&ctx, dev), 0);
    cr_assert_eq(sym("cuCtxPushCurrent_v2")(ctx), 0);
    cr_assert_eq(sym("cuMemcpyDtoH_v2")(dst, (unsigned long long)(uintptr_t)src, n), 0);
    cr_assert_eq(sym("cuCtxPopCurrent_v2")(&ctx), 0);
    sym("cuDevicePrimaryCtxRelease_v2")(dev);
}

/* The GPU, or the test skipped with the library's reason. */
static ShardGpu *gpu_or_skip(void)
{
    ShardGpu *g = NULL;
    ShardError err;
    int rc = shard_gpu_open(&g, 0, &err);
    if (rc == SHARD_ERR_NOCUDA)
        cr_skip_test("no CUDA device here: %s", err.message);
    cr_assert_eq(rc, 0, "%s", err.message);
    cuda_lib = dlopen("libcuda.so.1", RTLD_NOW);
    cr_assert(cuda_lib);
    return g;
}

/* ---- everywhere ----------------------------------------------------------------------- */

Test(gpu, no_gpu_is_a_clear_error)
{
    void *drv = dlopen("libcuda.so.1", RTLD_NOW);
    if (drv) {
        dlclose(drv);
        cr_skip_test("this machine has a CUDA driver: the no-driver message is not reachable");
    }
    ShardGpu *g = (ShardGpu *)&g;
    ShardError err;
    cr_assert_eq(shard_gpu_open(&g, 0, &err), SHARD_ERR_NOCUDA);
    cr_assert_null(g);
    cr_assert_eq(err.code, SHARD_ERR_NOCUDA);
    cr_assert(strstr(err.message, "libcuda.so.1") && strstr(err.message, "no CUDA driver"),
              "%s", err.message);
    shard_gpu_free(&g); /* NULL is fine */
}

Test(gpu, kernels_are_built_in_with_the_toolkit)
{
    cr_assert_eq(shard_gpu_kernels(), SHARD_TEST_KERNELS,
                 "nvcc was%s found at build time, yet shard_gpu_kernels() says %d",
                 SHARD_TEST_KERNELS ? "" : " not", shard_gpu_kernels());
}

Test(gpu, bad_settings_are_refused_before_any_gpu_call)
{
    ShardUploadSettings s;
    shard_upload_default_settings(&s);
    cr_assert_eq(s.buffers, 3);
    cr_assert_eq(s.height, 224);
    ShardUploader *u = (ShardUploader *)&u;
    ShardError err;
    cr_assert_eq(shard_uploader_open(&u, NULL, &s, NULL, &err), SHARD_ERR_INVALID);
    cr_assert_null(u);
}

/* ---- with a GPU ----------------------------------------------------------------------- */

/* Every batch of an epoch, through the GPU with this dtype, against the CPU loader's; wait:
 * the GPU loader's shard_loader_set_wait (0: none). */
static void epoch_equals_cpu_waiting(ShardGpuDType dtype, ShardLayout layout, double wait)
{
    ShardGpu *g = gpu_or_skip();
    const char *urls[] = {make_shards()};
    ShardLoaderSettings cs, gs;
    ShardDType cpu_dtype = dtype == SHARD_GPU_UINT8 ? SHARD_DTYPE_UINT8 : SHARD_DTYPE_FLOAT32;
    loader_settings(&cs, urls, cpu_dtype, layout);
    loader_settings(&gs, urls, SHARD_DTYPE_UINT8, SHARD_LAYOUT_NHWC);
    gs.allocator = shard_gpu_pinned_allocator(g);
    ShardLoader *cpu, *gl;
    ShardError err;
    cr_assert_eq(shard_loader_open(&cpu, &cs, &err), 0, "%s", err.message);
    cr_assert_eq(shard_loader_open(&gl, &gs, &err), 0, "%s", err.message);
    shard_loader_set_wait(gl, wait);
    ShardUploader *u = uploader_for(g, gl, dtype, layout);
    const ShardBatch *hb;
    const ShardDeviceBatch *db;
    size_t samples = 0, batches = 0;
    while (shard_loader_next(cpu, &hb) == 0) {
        cr_assert_eq(shard_uploader_next(u, NULL, &db), 0, "%s", shard_uploader_error(u));
        cr_assert_eq(db->size, hb->size);
        cr_assert_eq(db->image_bytes, hb->image_bytes);
        size_t n = hb->size * hb->image_bytes;
        unsigned char *img = malloc(n);
        int64_t lab[8];
        dtoh(img, db->images, n);
        dtoh(lab, db->labels, hb->size * sizeof *lab);
        cr_assert_eq(memcmp(lab, hb->labels, hb->size * sizeof *lab), 0, "labels differ");
        cr_assert_eq(strcmp(db->host->keys[0], hb->keys[0]), 0);
        cr_assert_eq(memcmp(img, hb->images, n), 0, "batch %zu's images differ", batches);
        free(img);
        shard_device_batch_host_done(db);
        shard_device_batch_release(db, NULL);
        shard_batch_release(cpu, hb);
        samples += hb->size;
        batches++;
    }
    cr_assert_eq(samples, NSAMPLES);
    cr_assert_eq(shard_uploader_next(u, NULL, &db), SHARD_EOS);
    ShardUploadStats st;
    shard_uploader_stats(u, &st);
    cr_assert_eq(st.batches, batches);
    cr_assert_eq(st.bytes, NSAMPLES * (20 * 12 * 3 + 8));
    cr_assert(st.copy_seconds > 0);
    cr_assert_eq(st.in_flight, 0);
    shard_uploader_free(&u);
    shard_loader_free(&gl);
    shard_loader_free(&cpu);
    shard_gpu_free(&g);
}

static void epoch_equals_cpu(ShardGpuDType dtype, ShardLayout layout)
{
    epoch_equals_cpu_waiting(dtype, layout, 0);
}

Test(gpu, uint8_batches_equal_the_cpu_loaders) { epoch_equals_cpu(SHARD_GPU_UINT8, SHARD_LAYOUT_NHWC); }

/* The Python binding sets the loader's wait to check for signals: a batch slower than that
 * wait is waited for, not the end of the upload (on the first GPU, "nothing yet: call again"
 * ended bench/gpu_bench.py's first epoch of 256-image batches). */
Test(gpu, a_batch_slower_than_the_loaders_wait_is_waited_for)
{
    epoch_equals_cpu_waiting(SHARD_GPU_UINT8, SHARD_LAYOUT_NHWC, 1e-6);
}

Test(gpu, uint8_nchw_made_on_the_gpu_equals_the_cpus)
{
    if (!shard_gpu_kernels())
        cr_skip_test("built without nvcc: no finish kernels");
    epoch_equals_cpu(SHARD_GPU_UINT8, SHARD_LAYOUT_NCHW);
}

Test(gpu, float32_normalized_on_the_gpu_equals_the_cpus)
{
    if (!shard_gpu_kernels())
        cr_skip_test("built without nvcc: no finish kernels");
    epoch_equals_cpu(SHARD_GPU_FLOAT32, SHARD_LAYOUT_NCHW);
}

Test(gpu, put_batches_come_back_and_a_full_ring_says_so)
{
    ShardGpu *g = gpu_or_skip();
    ShardUploadSettings us;
    shard_upload_default_settings(&us);
    us.decoder = SHARD_DECODER_CPU; /* exact: the GPU decodes alike, not bit for bit */
    us.batch_size = 4;
    us.height = us.width = 8;
    us.dtype = SHARD_GPU_UINT8;
    us.layout = SHARD_LAYOUT_NHWC;
    us.buffers = 2;
    ShardUploader *u;
    ShardError err;
    cr_assert_eq(shard_uploader_open(&u, g, &us, NULL, &err), 0, "%s", err.message);
    unsigned char a[4 * 192], b[4 * 192], back[4 * 192];
    for (size_t i = 0; i < sizeof a; i++)
        a[i] = (unsigned char)i, b[i] = (unsigned char)(255 - i);
    int64_t la[4] = {1, 2, 3, 4};
    cr_assert_eq(shard_uploader_put(u, a, 4, la), 0);
    cr_assert_eq(shard_uploader_put(u, b, 3, NULL), 0);
    memset(a + 192, 0, 192); /* the caller's memory is free on return */
    cr_assert_eq(shard_uploader_put(u, a, 1, NULL), SHARD_ERR_STATE, "a third batch in a ring of 2");
    const ShardDeviceBatch *d1, *d2, *d3;
    cr_assert_eq(shard_uploader_next(u, NULL, &d1), 0);
    cr_assert_eq(shard_uploader_next(u, NULL, &d2), 0);
    cr_assert_eq(shard_uploader_next(u, NULL, &d3), SHARD_ERR_STATE, "both buffers are held");
    cr_assert(strstr(shard_uploader_error(u), "held"), "%s", shard_uploader_error(u));
    cr_assert_eq(d1->size, 4);
    cr_assert_eq(d2->size, 3);
    dtoh(back, d1->images, 192);
    cr_assert_eq(back[100], 100);
    dtoh(back, d1->images, 4 * 192);
    cr_assert_eq(back[192 + 5], 192 + 5, "put copied the caller's memory before returning");
    int64_t lb[3];
    dtoh(lb, d2->labels, sizeof lb);
    cr_assert(lb[0] == -1 && lb[2] == -1);
    dtoh(back, d2->images, 3 * 192);
    cr_assert_eq(memcmp(back, b, 3 * 192), 0);
    shard_device_batch_release(d1, NULL);
    cr_assert_eq(shard_uploader_put(u, b, 2, la), 0, "a released buffer takes the next batch");
    cr_assert_eq(shard_uploader_put_end(u), 0);
    cr_assert_eq(shard_uploader_next(u, NULL, &d3), 0);
    cr_assert_eq(d3->size, 2);
    cr_assert_eq(shard_uploader_next(u, NULL, &d1), SHARD_EOS);
    /* freed with two batches held: they stay readable until released */
    shard_uploader_free(&u);
    shard_gpu_free(&g);
    g = gpu_or_skip();
    dtoh(back, d2->images, 3 * 192);
    cr_assert_eq(memcmp(back, b, 3 * 192), 0, "a held batch outlives its uploader");
    shard_device_batch_release(d2, NULL);
    shard_device_batch_release(d3, NULL); /* the last: the ring goes with it */
    shard_gpu_free(&g);
}

/* A loader of uint8 NHWC batches in g's pinned memory (what an uploader takes whole). */
static ShardLoader *pinned_loader(ShardGpu *g)
{
    static const char *urls[1];
    urls[0] = make_shards();
    ShardLoaderSettings gs;
    loader_settings(&gs, urls, SHARD_DTYPE_UINT8, SHARD_LAYOUT_NHWC);
    gs.allocator = shard_gpu_pinned_allocator(g);
    ShardLoader *gl;
    ShardError err;
    cr_assert_eq(shard_loader_open(&gl, &gs, &err), 0, "%s", err.message);
    return gl;
}

Test(gpu, freeing_with_batches_uploading_and_held_is_clean)
{
    ShardGpu *g = gpu_or_skip();
    ShardLoader *gl = pinned_loader(g);
    ShardUploader *u = uploader_for(g, gl, SHARD_GPU_UINT8, SHARD_LAYOUT_NHWC);
    const ShardDeviceBatch *held;
    cr_assert_eq(shard_uploader_next(u, NULL, &held), 0);
    shard_uploader_free(&u); /* the thread uploading ahead, one batch held */
    shard_loader_free(&gl);  /* every host batch is back */
    unsigned char px[3];
    dtoh(px, held->images, 3);
    shard_device_batch_release(held, NULL);
    shard_gpu_free(&g);
}

/* The upload is a stage among the loader's: its thread's time adds up, the caller's too, and
 * an uploader fed by put has no stages to give. */
Test(gpu, the_upload_is_a_stage_of_the_loaders_statistics)
{
    ShardGpu *g = gpu_or_skip();
    ShardLoader *gl = pinned_loader(g);
    ShardUploader *u = uploader_for(g, gl, SHARD_GPU_UINT8, SHARD_LAYOUT_NHWC);
    const ShardDeviceBatch *b;
    uint64_t n = 0;
    while (shard_uploader_next(u, NULL, &b) == 0) {
        n += b->size;
        shard_device_batch_release(b, NULL);
    }
    ShardLoaderStats st;
    shard_uploader_loader_stats(u, &st);
    const ShardStageStats *up = &st.stages[SHARD_STAGE_UPLOAD], *dl = &st.stages[SHARD_STAGE_DELIVER];
    cr_assert_str_eq(up->name, "upload");
    cr_assert_eq(up->threads, 1);
    cr_assert_geq(up->items, n);
    cr_assert_gt(up->bytes, 0);
    for (const ShardStageStats *s = up; s <= dl; s++) {
        double sum = s->busy_seconds + s->wait_input_seconds + s->wait_output_seconds;
        cr_assert(sum <= s->seconds * 1.1 + 0.05 && sum >= s->seconds * 0.9 - 0.05,
                  "%s: busy %.3f + waits %.3f + %.3f against %.3f", s->name, s->busy_seconds,
                  s->wait_input_seconds, s->wait_output_seconds, s->seconds);
    }
    cr_assert(st.bottleneck >= SHARD_STAGE_FETCH && st.bottleneck < SHARD_STAGES);
    shard_uploader_free(&u);
    shard_loader_free(&gl);
    ShardUploadSettings us;
    ShardError err;
    shard_upload_default_settings(&us);
    us.decoder = SHARD_DECODER_CPU; /* exact: the GPU decodes alike, not bit for bit */
    cr_assert_eq(shard_uploader_open(&u, g, &us, NULL, &err), 0, "%s", err.message);
    shard_uploader_loader_stats(u, &st);
    cr_assert_null(st.stages[SHARD_STAGE_DELIVER].name, "no loader: nothing to say");
    shard_uploader_free(&u);
    shard_gpu_free(&g);
}

/* ---- ordering and lifetimes, where a GPU is ---------------------------------------------- */

typedef struct {
    atomic_int done;
} Slow;

/* A host function on the legacy stream: work that takes 300 ms, then says it is done. */
static void slow_work(void *p)
{
    usleep(300 * 1000);
    atomic_store(&((Slow *)p)->done, 1);
}

/* A ring of one buffer: a batch is taken, 300 ms of work is queued on the legacy stream, the
 * batch is released naming `release_on`, and the next put goes into the same buffer.
 * @return whether that work was done when the next upload had finished */
static int work_done_before_the_buffer_was_rewritten(void *release_on)
{
    ShardGpu *g = gpu_or_skip();
    ShardUploadSettings us;
    shard_upload_default_settings(&us);
    us.decoder = SHARD_DECODER_CPU; /* exact: the GPU decodes alike, not bit for bit */
    us.batch_size = 4;
    us.height = us.width = 8;
    us.layout = SHARD_LAYOUT_NHWC;
    us.buffers = 1;
    ShardUploader *u;
    ShardError err;
    cr_assert_eq(shard_uploader_open(&u, g, &us, NULL, &err), 0, "%s", err.message);
    unsigned char img[4 * 192] = {0};
    const ShardDeviceBatch *b;
    cr_assert_eq(shard_uploader_put(u, img, 4, NULL), 0);
    cr_assert_eq(shard_uploader_next(u, NULL, &b), 0);
    void *ctx, *side;
    int dev;
    Slow slow = {0};
    cr_assert_eq(sym("cuDeviceGet")(&dev, 0), 0);
    cr_assert_eq(sym("cuDevicePrimaryCtxRetain")(&ctx, dev), 0);
    cr_assert_eq(sym("cuCtxPushCurrent_v2")(ctx), 0);
    cr_assert_eq(sym("cuStreamCreate")(&side, 1), 0);
    cr_assert_eq(sym("cuLaunchHostFunc")(NULL, slow_work, &slow), 0);
    shard_device_batch_release(b, release_on); /* with the slow work still queued */
    cr_assert_eq(shard_uploader_put(u, img, 2, NULL), 0, "%s", shard_uploader_error(u));
    cr_assert_eq(shard_uploader_next(u, side, &b), 0);
    cr_assert_eq(sym("cuStreamSynchronize")(side), 0); /* the second upload is done */
    int done = atomic_load(&slow.done);
    shard_device_batch_release(b, side);
    cr_assert_eq(sym("cuStreamSynchronize")(NULL), 0);
    sym("cuStreamDestroy_v2")(side);
    sym("cuCtxPopCurrent_v2")(&ctx);
    sym("cuDevicePrimaryCtxRelease_v2")(dev);
    shard_uploader_free(&u);
    shard_gpu_free(&g);
    return done;
}

/* NULL is the legacy default stream at a release, as at next: a consumer working there is
 * waited for. The control releases with SHARD_STREAM_NONE ("I queued nothing") and sees its
 * buffer rewritten while the work still runs: the check above can fail. */
Test(gpu, a_release_on_null_waits_for_the_legacy_streams_work)
{
    cr_assert(work_done_before_the_buffer_was_rewritten(NULL),
              "the buffer was rewritten with the legacy stream's work still queued");
    cr_assert(!work_done_before_the_buffer_was_rewritten(SHARD_STREAM_NONE),
                  "control: a release recording nothing should not wait for that work");
}

/* A loader whose batches are larger than the ring's is refused naming both sizes, and its
 * host batch goes back (the loader frees cleanly). */
Test(gpu, a_loader_batch_that_does_not_fit_the_ring_is_refused)
{
    ShardGpu *g = gpu_or_skip();
    ShardLoader *gl = pinned_loader(g); /* batches of 8 images of 20x12 */
    ShardUploadSettings us;
    shard_upload_default_settings(&us);
    us.decoder = SHARD_DECODER_CPU; /* exact: the GPU decodes alike, not bit for bit */
    us.batch_size = 4;
    us.height = 12;
    us.width = 20;
    us.layout = SHARD_LAYOUT_NHWC;
    ShardUploader *u;
    ShardError err;
    cr_assert_eq(shard_uploader_open(&u, g, &us, gl, &err), 0, "%s", err.message);
    const ShardDeviceBatch *b;
    cr_assert_eq(shard_uploader_next(u, NULL, &b), SHARD_ERR_INVALID);
    cr_assert(strstr(shard_uploader_error(u), "8 images") &&
              strstr(shard_uploader_error(u), "at most 4"), "%s", shard_uploader_error(u));
    shard_uploader_free(&u);
    us.batch_size = 8;
    us.width = 24; /* the right count, the wrong size */
    cr_assert_eq(shard_uploader_open(&u, g, &us, gl, &err), 0, "%s", err.message);
    cr_assert_eq(shard_uploader_next(u, NULL, &b), SHARD_ERR_INVALID);
    cr_assert(strstr(shard_uploader_error(u), "720 bytes"), "%s", shard_uploader_error(u));
    shard_uploader_free(&u);
    shard_loader_free(&gl);
    shard_gpu_free(&g);
}

/* One ring for every epoch: after the end, a rewind and the loader's next epoch give that
 * epoch's batches in the same device buffers (nothing allocated again). */
Test(gpu, a_rewound_ring_serves_the_next_epoch_in_the_same_buffers)
{
    ShardGpu *g = gpu_or_skip();
    ShardLoader *gl = pinned_loader(g);
    ShardUploader *u = uploader_for(g, gl, SHARD_GPU_UINT8, SHARD_LAYOUT_NHWC);
    const ShardDeviceBatch *b;
    void *seen[8] = {0};
    size_t nseen = 0, samples = 0;
    for (int epoch = 0; epoch < 2; epoch++) {
        samples = 0;
        while (shard_uploader_next(u, NULL, &b) == 0) {
            samples += b->size;
            size_t k = 0;
            while (k < nseen && seen[k] != b->images)
                k++;
            cr_assert(epoch == 0 || k < nseen, "epoch 2 got a buffer epoch 1 did not have");
            if (k == nseen && nseen < 8)
                seen[nseen++] = b->images;
            shard_device_batch_release(b, NULL);
        }
        cr_assert_eq(samples, NSAMPLES, "epoch %d", epoch);
        cr_assert_eq(shard_uploader_rewind(u), 0, "%s", shard_uploader_error(u));
        cr_assert_eq(shard_loader_set_epoch(gl, (uint64_t)epoch + 1), 0);
    }
    cr_assert_leq(nseen, 3, "the ring has 3 buffers");
    shard_uploader_free(&u);
    shard_loader_free(&gl);
    shard_gpu_free(&g);
}

/* The statistics' bytes are those of finished copies, the ones copy_seconds times: read
 * before the copies end, the bandwidth is not inflated. */
Test(gpu, bytes_are_counted_with_the_copy_time)
{
    ShardGpu *g = gpu_or_skip();
    ShardUploadSettings us;
    shard_upload_default_settings(&us);
    us.decoder = SHARD_DECODER_CPU; /* exact: the GPU decodes alike, not bit for bit */
    us.batch_size = 64;
    us.layout = SHARD_LAYOUT_NHWC; /* 224x224: 9.6 MB a batch */
    ShardUploader *u;
    ShardError err;
    cr_assert_eq(shard_uploader_open(&u, g, &us, NULL, &err), 0, "%s", err.message);
    size_t n = 64 * 224 * 224 * 3;
    unsigned char *img = calloc(1, n);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(shard_uploader_put(u, img, 64, NULL), 0);
    ShardUploadStats st;
    shard_uploader_stats(u, &st);
    cr_assert_eq(st.batches, 3);
    uint64_t per = 64 * (224 * 224 * 3 + 8);
    cr_assert(st.bytes % per == 0 && st.bytes <= 3 * per);
    cr_assert((st.bytes == 0) == (st.copy_seconds == 0), "bytes %llu, %.6f s",
              (unsigned long long)st.bytes, st.copy_seconds);
    const ShardDeviceBatch *b[3];
    for (int i = 0; i < 3; i++)
        cr_assert_eq(shard_uploader_next(u, NULL, &b[i]), 0);
    cr_assert_eq(shard_device_batch_wait(b[2], NULL), 0);
    dtoh(img, b[2]->images, 1); /* synchronous on the legacy stream: every copy is done */
    shard_uploader_stats(u, &st);
    cr_assert_eq(st.bytes, 3 * per);
    for (int i = 0; i < 3; i++)
        shard_device_batch_release(b[i], NULL);
    free(img);
    shard_uploader_free(&u);
    shard_gpu_free(&g);
}

/* The last handle let go leaves the driver loaded: its threads outlive any handle. */
Test(gpu, the_driver_stays_loaded_after_the_last_handle)
{
    ShardGpu *g = NULL;
    ShardError err;
    int rc = shard_gpu_open(&g, 0, &err);
    if (rc == SHARD_ERR_NOCUDA)
        cr_skip_test("no CUDA device here: %s", err.message);
    cr_assert_eq(rc, 0, "%s", err.message);
    shard_gpu_free(&g);
    void *still = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    cr_assert_not_null(still, "libcuda.so.1 was unloaded with the last ShardGpu");
    dlclose(still);
    cr_assert_eq(shard_gpu_open(&g, 0, &err), 0, "%s", err.message);
    shard_gpu_free(&g);
}
