/*
 * Iterates every sample of the given shards through the public API, with no decode, and
 * prints samples, tar payload bytes and seconds. With --touch every byte of every member
 * is read (summed), as a consumer would, so the comparison with `cat` is fair.
 *
 *     read_iter [--touch] SHARD...     (paths, brace patterns or manifests)
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <shard/shard.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int touch = 0, first = 1;
    if (argc > 1 && !strcmp(argv[1], "--touch"))
        touch = 1, first = 2;
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
                    if (touch) {
                        const unsigned char *p = v->fields[k].data;
                        uint64_t acc = 0;
                        for (uint64_t j = 0; j < v->fields[k].size; j += 64)
                            acc += p[j];
                        sum += acc;
                    }
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
