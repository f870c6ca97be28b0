/* Shards of text samples for the reading tests, written with the library's writer. */
#ifndef SHARD_TESTSHARD_H
#define SHARD_TESTSHARD_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shard/shard.h>

#include "testutil.h"

/* n samples in dir/name (a pattern): key "dK/sNNNNN" (K = i % 4), "cls" i % 10, "txt" of
 * 50 + (i * 131) % 3000 letters from 'A' + i; frame_size 0 for the default. Returns the
 * first shard's path (malloc'd). */
static inline char *tu_write_shard(const char *dir, const char *name, int n, size_t frame_size)
{
    ShardWriterSettings s;
    shard_writer_default_settings(&s);
    char *pattern = tu_path(dir, name);
    s.pattern = pattern;
    s.sync = 0;
    if (frame_size)
        s.frame_size = frame_size;
    ShardWriter *w;
    ShardError err;
    cr_assert_eq(shard_writer_open(&w, &s, &err), 0, "%s", err.message);
    static char text[8192];
    for (int i = 0; i < n; i++) {
        char key[64], cls[16];
        snprintf(key, sizeof key, "d%d/s%05d", i % 4, i);
        snprintf(cls, sizeof cls, "%d", i % 10);
        size_t len = 50 + (size_t)(i * 131) % 3000;
        for (size_t k = 0; k < len; k++)
            text[k] = (char)('A' + (i + (int)k) % 26);
        ShardField f[] = {{"txt", text, len}, {"cls", cls, strlen(cls)}};
        ShardSample smp = {key, f, 2};
        cr_assert_eq(shard_writer_add(w, &smp), 0, "%s", shard_writer_error(w));
    }
    cr_assert_eq(shard_writer_finish(w), 0);
    char *path = strdup(shard_writer_shard(w, 0)->url);
    shard_writer_free(&w);
    free(pattern);
    return path;
}

/* A set of shards dir/NAME-NNNN.EXT of per samples each (the last shorter), written with a
 * manifest dir/NAME.json. */
typedef struct TuSet {
    ShardWriter *w;
    ShardManifest *m;
    char *manifest;
} TuSet;

static inline void tu_set_open(TuSet *t, const char *dir, const char *name, const char *ext,
                               uint64_t per)
{
    char pattern[4096], file[256];
    snprintf(pattern, sizeof pattern, "%s/%s-%%04d%s", dir, name, ext);
    snprintf(file, sizeof file, "%s.json", name);
    ShardWriterSettings s;
    shard_writer_default_settings(&s);
    s.pattern = pattern;
    s.maxcount = per;
    s.sync = 0;
    s.checksums = 0;
    ShardError err;
    cr_assert_eq(shard_writer_open(&t->w, &s, &err), 0, "%s", err.message);
    cr_assert_eq(shard_manifest_new(&t->m, name), 0);
    t->manifest = tu_path(dir, file);
}

static inline void tu_set_add(TuSet *t, const char *key, ShardField *f, size_t n)
{
    ShardSample smp = {key, f, n};
    cr_assert_eq(shard_writer_add(t->w, &smp), 0, "%s", shard_writer_error(t->w));
}

/* Finishes the shards, writes the manifest and returns its path (malloc'd). */
static inline char *tu_set_finish(TuSet *t)
{
    ShardError err;
    cr_assert_eq(shard_writer_finish(t->w), 0);
    for (size_t i = 0; i < shard_writer_count(t->w); i++)
        shard_manifest_add(t->m, shard_writer_shard(t->w, i));
    cr_assert_eq(shard_manifest_write(t->m, t->manifest, &err), 0, "%s", err.message);
    shard_manifest_free(&t->m);
    shard_writer_free(&t->w);
    return t->manifest;
}

/* Restores state into a reader made with s: 0, or the refusal's message into why
 * (SHARD_ERROR_MAX bytes). */
static inline int tu_restore_into(const ShardReaderSettings *s, const char *state, char *why)
{
    ShardReader *r;
    ShardError err;
    cr_assert_eq(shard_reader_open(&r, s, &err), 0, "%s", err.message);
    int rc = shard_reader_restore(r, state);
    snprintf(why, SHARD_ERROR_MAX, "%s", rc ? shard_reader_error(r) : "");
    shard_reader_free(&r);
    return rc;
}

#endif /* SHARD_TESTSHARD_H */
