/*
 * Iterates every sample of the given shards through the public API, with no decode, and
 * prints samples, tar payload bytes and seconds. With --touch every byte of every member
 * is read (summed), as a consumer would, so the comparison with `cat` is fair.
 *
 *     read_iter [--touch] SHARD...     (paths, brace patterns or manifests)
 *     read_iter [--touch] --reader SHUFFLE STREAMS SHARD...
 *
 * With --reader the samples come through the streaming reader (shard shuffle, split for
 * one consumer, STREAMS interleaved, a SHUFFLE-sample buffer) instead of ShardFile.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <shard/shard.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t touch_bytes(const ShardFieldView *f)
{
    uint64_t acc = 0;
    for (uint64_t j = 0; j < f->size; j += 64)
        acc += f->data[j];
    return acc;
}

static int run_reader(int touch, size_t shuffle, size_t streams, char **specs, int n)
{
    ShardReaderSettings s;
    shard_reader_default_settings(&s);
    s.urls = (const char *const *)specs;
    s.nurls = (size_t)n;
    s.seed = 1;
    s.have_seed = 1;
    s.rank = 0;
    s.world_size = 1;
    s.shuffle_buffer = shuffle;
    s.streams = streams;
    ShardReader *r;
    ShardError err;
    double t0 = now();
    if (shard_reader_open(&r, &s, &err)) {
        fprintf(stderr, "read_iter: %s\n", err.message);
        return 1;
    }
    uint64_t samples = 0, bytes = 0, sum = 0;
    const char *key, *url;
    const ShardFieldView *f;
    size_t nf;
    int rc;
    while ((rc = shard_reader_next(r, &key, &url, &f, &nf)) == 0) {
        samples++;
        for (size_t k = 0; k < nf; k++) {
            bytes += f[k].size;
            if (touch)
                sum += touch_bytes(&f[k]);
        }
    }
    if (rc != SHARD_EOS) {
        fprintf(stderr, "read_iter: %s\n", shard_reader_error(r));
        return 1;
    }
    ShardReaderStats st;
    shard_reader_stats(r, &st);
    shard_reader_free(&r);
    printf("samples %llu bytes %llu seconds %.4f touch %d waited %.4f checksum %llu\n",
           (unsigned long long)samples, (unsigned long long)bytes, now() - t0, touch,
           st.wait_seconds, (unsigned long long)(sum & 0xff));
    return 0;
}

int main(int argc, char **argv)
{
    int touch = 0, first = 1;
    if (argc > 1 && !strcmp(argv[1], "--touch"))
        touch = 1, first = 2;
    if (argc > first + 2 && !strcmp(argv[first], "--reader"))
        return run_reader(touch, (size_t)atol(argv[first + 1]), (size_t)atol(argv[first + 2]),
                          argv + first + 3, argc - first - 3);
    uint64_t samples = 0, bytes = 0, sum = 0;
    double t0 = now();
    for (int a = first; a < argc; a++) {
        char **urls;
        size_t n;
        ShardError err;
        if (shard_urls_expand(argv[a], &urls, &n, &err)) {
            fprintf(stderr, "read_iter: %s\n", err.message);
            return 1;
        }
        for (size_t i = 0; i < n; i++) {
            ShardFileSettings s;
            shard_file_default_settings(&s);
            s.load_index = 0;
            ShardFile *f;
            if (shard_file_open(&f, urls[i], &s, &err)) {
                fprintf(stderr, "read_iter: %s\n", err.message);
                return 1;
            }
            const ShardSampleView *v;
            int rc;
            while ((rc = shard_file_next(f, &v)) == 0) {
                samples++;
                for (size_t k = 0; k < v->nfields; k++) {
                    bytes += v->fields[k].size;
                    if (touch)
                        sum += touch_bytes(&v->fields[k]);
                }
            }
            if (rc != SHARD_EOS) {
                fprintf(stderr, "read_iter: %s\n", shard_file_error(f));
                return 1;
            }
            shard_file_free(&f);
        }
        shard_urls_free(urls, n);
    }
    double dt = now() - t0;
    printf("samples %llu bytes %llu seconds %.4f touch %d checksum %llu\n",
           (unsigned long long)samples, (unsigned long long)bytes, dt, touch,
           (unsigned long long)(sum & 0xff));
    return 0;
}
