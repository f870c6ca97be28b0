/*
 * Reads decoded batches through the public API: the streaming reader, the decode pool and
 * the batch ring. Prints each batch's size, first key and label, and the rate.
 *
 *     cc read_batches.c $(pkg-config --cflags --libs libshard) -o read_batches
 *     ./read_batches shards/train.json [batch_size]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <shard/shard.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s SHARDS [batch_size]\n", argv[0]);
        return 2;
    }
    ShardLoaderSettings s;
    shard_loader_default_settings(&s);
    const char *urls[] = {argv[1]};
    s.reader.urls = urls;
    s.reader.nurls = 1;
    s.reader.seed = 0;
    s.reader.have_seed = 1;
    s.reader.shuffle_buffer = 1000;
    s.batch_size = argc > 2 ? (size_t)atoi(argv[2]) : 64;
    s.transform.width = s.transform.height = 224;
    s.transform.crop = SHARD_CROP_RANDOM_RESIZED;
    s.transform.flip = 1;
    ShardLoader *l;
    ShardError err;
    if (shard_loader_open(&l, &s, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const ShardBatch *b;
    int rc;
    size_t samples = 0;
    while ((rc = shard_loader_next(l, &b)) == 0) {
        /* b->images: size x 3 x 224 x 224 uint8, b->labels: size int64 */
        printf("batch %llu: %zu samples, first %s label %lld\n", (unsigned long long)b->index,
               b->size, b->keys[0], (long long)b->labels[0]);
        samples += b->size;
        shard_batch_release(l, b);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rc != SHARD_EOS)
        fprintf(stderr, "%s\n", shard_loader_error(l));
    double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("%zu samples in %.2f s: %.0f samples/s\n", samples, dt, samples / dt);
    shard_loader_free(&l);
    return rc == SHARD_EOS ? 0 : 1;
}
