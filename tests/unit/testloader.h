/* What the loader's tests share: shards of real coloured JPEGs, and a small loader's
 * settings over them. */
#ifndef SHARD_TESTLOADER_H
#define SHARD_TESTLOADER_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shard/shard.h>

#include "testjpeg.h"
#include "testshard.h"

/* Red from the seed, green from the position, blue from the seed again. */
static inline void tu_coloured(int x, int y, int w, int h, int seed, unsigned char rgb[3])
{
    (void)w, (void)h;
    rgb[0] = (unsigned char)(seed * 37);
    rgb[1] = (unsigned char)(x * 4 + y);
    rgb[2] = (unsigned char)(200 - seed);
}

/* Sample i's JPEG (malloc'd, *size bytes), as tu_jpeg_shards writes it. */
static inline unsigned char *tu_sample_jpeg(int i, unsigned long *size)
{
    return tu_jpeg(40 + i % 7, 30 + i % 5, tu_coloured, i, size);
}

/* n samples "k%04d" (jpg, cls = i % 5, and with json a json on even ones) in shards of 16
 * named prefix-*.tar in dir; sample 13's jpg cut short when damage. The manifest's path,
 * malloc'd. */
static inline char *tu_jpeg_shards(const char *dir, const char *prefix, int n, int damage,
                                   int json)
{
    TuSet t;
    tu_set_open(&t, dir, prefix, ".tar", 16);
    for (int i = 0; i < n; i++) {
        char key[32], cls[8], js[32];
        snprintf(key, sizeof key, "k%04d", i);
        snprintf(cls, sizeof cls, "%d", i % 5);
        int nj = snprintf(js, sizeof js, "{\"i\": %d}", i);
        unsigned long size;
        unsigned char *img = tu_sample_jpeg(i, &size);
        if (damage && i == 13)
            size /= 2;
        ShardField f[] = {{"jpg", img, size}, {"cls", cls, strlen(cls)}, {"json", js, (size_t)nj}};
        tu_set_add(&t, key, f, json && i % 2 == 0 ? 3 : 2);
        free(img);
    }
    return tu_set_finish(&t);
}

/* A loader over urls (one spec): seed 3, rank 0 of 1, a shuffle of 20, batches of 8 of
 * 16 x 16 images, 3 threads, 3 batch buffers. */
static inline void tu_loader_settings(ShardLoaderSettings *s, const char **urls)
{
    shard_loader_default_settings(s);
    s->reader.urls = urls;
    s->reader.nurls = 1;
    s->reader.seed = 3;
    s->reader.have_seed = 1;
    s->reader.rank = 0;
    s->reader.world_size = 1;
    s->reader.shuffle_buffer = 20;
    s->batch_size = 8;
    s->threads = 3;
    s->batches = 3;
    s->transform.width = s->transform.height = 16;
}

#endif /* SHARD_TESTLOADER_H */
