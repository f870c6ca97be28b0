/*
 * The smallest use of the writer: three samples into one shard with its index and a
 * manifest. Build against an installed libshard:
 *
 *     cc pack_minimal.c $(pkg-config --cflags --libs libshard) -o pack_minimal
 *     ./pack_minimal /tmp/out
 */
#include <stdio.h>
#include <string.h>

#include <shard/shard.h>

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : ".";
    char pattern[4096], manifest_path[4096];
    snprintf(pattern, sizeof pattern, "%s/mini-%%06d.tar", dir);
    snprintf(manifest_path, sizeof manifest_path, "%s/mini.json", dir);

    ShardWriterSettings s;
    shard_writer_default_settings(&s);
    s.pattern = pattern;
    ShardWriter *w;
    ShardError err;
    if (shard_writer_open(&w, &s, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    for (int i = 0; i < 3; i++) {
        char key[32], text[64], cls[8];
        snprintf(key, sizeof key, "sample%03d", i);
        snprintf(text, sizeof text, "caption of sample %d", i);
        snprintf(cls, sizeof cls, "%d", i % 2);
        ShardField fields[] = {{"txt", text, strlen(text)}, {"cls", cls, strlen(cls)}};
        ShardSample sample = {key, fields, 2};
        if (shard_writer_add(w, &sample)) {
            fprintf(stderr, "%s\n", shard_writer_error(w));
            shard_writer_free(&w);
            return 1;
        }
    }
    int rc = shard_writer_finish(w);
    if (rc) {
        fprintf(stderr, "%s\n", shard_writer_error(w));
        shard_writer_free(&w);
        return 1;
    }
    ShardManifest *m;
    shard_manifest_new(&m, "mini");
    for (size_t i = 0; i < shard_writer_count(w); i++)
        shard_manifest_add(m, shard_writer_shard(w, i));
    rc = shard_manifest_write(m, manifest_path, &err);
    if (rc)
        fprintf(stderr, "%s\n", err.message);
    else
        printf("libshard %s: wrote %zu shard(s), %llu samples, manifest %s\n", shard_version(),
               shard_manifest_count(m), (unsigned long long)shard_manifest_samples(m),
               manifest_path);
    shard_manifest_free(&m);
    shard_writer_free(&w);
    return rc ? 1 : 0;
}
