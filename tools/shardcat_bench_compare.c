/*
 * shardcat bench's references: the decoder alone on the pipeline's own first images (the
 * ceiling, in threads of its own) and the WebDataset + PIL pipeline on the same shards (the
 * peer, python3 -m libshard.peer in a child process).
 */
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "shardcat_bench_compare.h"

#define CEILING_IMAGES 4096
#define CEILING_BYTES ((size_t)256 << 20)

/* ---- the ceiling: the decoder alone ---------------------------------------------------- */

typedef struct Images {
    unsigned char **data;
    size_t *size, n;
    uint64_t *seed;
    ShardTransform t;
    double until;
    uint64_t decoded;
} Images;

static void *decode_main(void *arg)
{
    Images *im = arg;
    size_t bytes = shard_transform_output_size(&im->t);
    unsigned char *out = malloc(bytes);
    char msg[256];
    uint64_t n = 0;
    for (size_t i = 0; out && cli_now() < im->until; i = (i + 1) % im->n, n++)
        shard_decode_transform(im->data[i], im->size[i], &im->t, im->seed[i], out, msg,
                               sizeof msg);
    free(out);
    im->decoded = n;
    return NULL;
}

/* The first samples the pipeline makes with these settings (at most CEILING_IMAGES, or
 * CEILING_BYTES of images): each one's image bytes and the seed of its crop, scale and
 * flip (ShardBatch.seeds), so that decoding them alone is the very work the decode stage
 * did for them. */
static void first_images(const Bench *b, uint64_t streams, uint64_t depth, Images *im)
{
    ShardLoaderSettings s;
    bench_loader_settings(b, &s, 1, streams, depth);
    s.raw_fields = s.image_fields ? s.image_fields : "jpg;jpeg;png;webp";
    im->t = s.transform;
    ShardLoader *l;
    ShardError err;
    if (shard_loader_open(&l, &s, &err))
        return;
    const ShardBatch *bt;
    size_t bytes = 0;
    while (im->n < CEILING_IMAGES && bytes < CEILING_BYTES && shard_loader_next(l, &bt) == 0) {
        for (size_t i = 0; i < bt->size && im->n < CEILING_IMAGES; i++)
            for (size_t k = 0; k < bt->nfields; k++) {
                const ShardBatchField *f = &bt->fields[k];
                size_t len = (size_t)(f->offsets[i + 1] - f->offsets[i]);
                if (!f->present[i] || !(im->data[im->n] = malloc(len ? len : 1)))
                    continue;
                memcpy(im->data[im->n], f->data + f->offsets[i], len);
                im->size[im->n] = len;
                im->seed[im->n++] = bt->seeds[i];
                bytes += len;
                break;
            }
        shard_batch_release(l, bt);
    }
    shard_loader_free(&l);
}

/* Samples/s of libjpeg-turbo alone on the pipeline's first images (first_images), one copy
 * per thread, each decoding them all in turn; 0 when none was read. */
double bench_ceiling(const Bench *b, uint64_t threads, uint64_t streams, uint64_t depth,
                     size_t *images)
{
    Images im = {calloc(CEILING_IMAGES, sizeof *im.data), calloc(CEILING_IMAGES, sizeof *im.size),
                 0, calloc(CEILING_IMAGES, sizeof *im.seed), {0}, 0, 0};
    if (im.data && im.size && im.seed)
        first_images(b, streams, depth, &im);
    *images = im.n;
    double rate = 0;
    if (im.n) {
        Images *each = calloc(threads, sizeof *each);
        pthread_t *t = calloc(threads, sizeof *t);
        double t0 = cli_now(), dur = b->seconds < 3 ? b->seconds : 3;
        uint64_t started = 0, total = 0;
        for (uint64_t i = 0; each && t && i < threads; i++) {
            each[i] = im;
            each[i].until = t0 + dur;
            started += pthread_create(&t[i], NULL, decode_main, &each[i]) == 0;
        }
        for (uint64_t i = 0; i < started; i++) {
            pthread_join(t[i], NULL);
            total += each[i].decoded;
        }
        rate = (double)total / (cli_now() - t0);
        free(each);
        free(t);
    }
    for (size_t i = 0; i < im.n; i++)
        free(im.data[i]);
    free(im.data);
    free(im.size);
    free(im.seed);
    return rate;
}

/* ---- the peer: WebDataset + PIL on the same shards --------------------------------------- */

/* The interpreter that runs the peer: $SHARD_PYTHON; else the python3 beside this shardcat
 * (a venv's bin/, where pip installs both); else the active venv's; else Debian's. */
static const char *peer_python(char *buf, size_t size)
{
    const char *py = getenv("SHARD_PYTHON");
    if (py && *py)
        return py;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            snprintf(buf, size, "%s/python3", exe);
            if (access(buf, X_OK) == 0)
                return buf;
        }
    }
    const char *venv = getenv("VIRTUAL_ENV");
    if (venv && *venv) {
        snprintf(buf, size, "%s/bin/python3", venv);
        if (access(buf, X_OK) == 0)
            return buf;
    }
    return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

/* The last non-empty line of f (what a Python traceback ends with), into line. */
static void last_line(FILE *f, char *line, size_t size)
{
    char buf[512];
    line[0] = 0;
    rewind(f);
    while (fgets(buf, sizeof buf, f)) {
        buf[strcspn(buf, "\r\n")] = 0;
        if (buf[strspn(buf, " \t")])
            snprintf(line, size, "%s", buf + strspn(buf, " \t"));
    }
}

/* Why the peer did not run, with the way to point it at another interpreter. */
static void peer_failed(BenchPeer *p, const char *py, const char *why)
{
    snprintf(p->pipeline, sizeof p->pipeline,
             "not run: %.200s -m libshard.peer: %.240s (it needs an interpreter that imports "
             "libshard and torch: set SHARD_PYTHON, e.g. SHARD_PYTHON=$VIRTUAL_ENV/bin/python)",
             py, why);
}

void bench_peer(const Bench *b, uint64_t workers, BenchPeer *p)
{
    char pybuf[4200];
    const char *py = peer_python(pybuf, sizeof pybuf);
    char secs[32], warm[32], nw[32], bs[32], size[32];
    snprintf(secs, sizeof secs, "%g", b->seconds);
    snprintf(warm, sizeof warm, "%g", b->warmup);
    snprintf(nw, sizeof nw, "%llu", (unsigned long long)workers);
    snprintf(bs, sizeof bs, "%zu", b->batch_size);
    snprintf(size, sizeof size, "%d", b->size);
    const char *fixed[] = {py, "-m", "libshard.peer", "--seconds", secs, "--warmup", warm,
                           "--workers", nw, "--batch-size", bs, "--image-size", size};
    size_t nf = sizeof fixed / sizeof *fixed;
    char **argv = calloc(nf + b->nurls + 1, sizeof *argv);
    int fd[2] = {-1, -1};
    FILE *err = tmpfile(); /* its stderr, for the reason it failed */
    p->rate = 0;
    if (!argv || !err || pipe(fd)) {
        peer_failed(p, py, "out of memory or files");
        free(argv);
        if (err)
            fclose(err);
        return;
    }
    for (size_t i = 0; i < nf; i++)
        argv[i] = (char *)fixed[i];
    for (size_t i = 0; i < b->nurls; i++)
        argv[nf + i] = b->urls[i];
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fileno(err), 2);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    pid_t pid;
    int rc = posix_spawnp(&pid, py, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    free(argv);
    char out[4096];
    size_t n = 0;
    ssize_t k;
    while (!rc && n < sizeof out - 1 && (k = read(fd[0], out + n, sizeof out - 1 - n)) > 0)
        n += (size_t)k;
    out[n] = 0;
    close(fd[0]);
    int status = 0;
    char why[256];
    if (rc) {
        snprintf(why, sizeof why, "cannot run it: %s", strerror(rc));
        peer_failed(p, py, why);
    } else if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
        last_line(err, why, sizeof why);
        if (!why[0] && WIFSIGNALED(status))
            snprintf(why, sizeof why, "killed by signal %d", WTERMSIG(status));
        else if (!why[0])
            snprintf(why, sizeof why, "exit status %d", WEXITSTATUS(status));
        peer_failed(p, py, why);
    } else {
        json_error_t je;
        json_t *doc = json_loads(out, JSON_DISABLE_EOF_CHECK, &je);
        const char *name = NULL;
        double rate = 0;
        if (doc && !json_unpack(doc, "{s:F,s:s}", "samples_per_second", &rate, "pipeline",
                                &name)) {
            p->rate = rate;
            snprintf(p->pipeline, sizeof p->pipeline, "%s", name);
        } else {
            peer_failed(p, py, "it printed no result");
        }
        json_decref(doc);
    }
    fclose(err);
}
