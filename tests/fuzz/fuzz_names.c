/* What users and manifests write: brace patterns, URL resolution and classification, member
 * names split into key and field, key checks, escaping for terminals, field comparison. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/url.h"
#include "shard/shard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = 0;
    /* Brace expansion alone: nothing that reads files or the network (manifests, prefixes,
     * schemes), and patterns that stay small: at most two groups of at most 100 (products
     * may legitimately reach the library's limits, ten million names or 1 GiB of them,
     * too slow and too big to fuzz). */
    size_t groups = 0, commas = 0, digits = 0, run = 0;
    for (const char *p = s; *p; p++) {
        groups += *p == '{';
        commas += *p == ',';
        run = (*p >= '0' && *p <= '9') ? run + 1 : 0;
        digits = run > digits ? run : digits;
    }
    if (size < 256 && groups <= 2 && commas <= 16 && digits <= 2 && !strchr(s, ':') &&
        !strstr(s, ".json")) {
        char **urls;
        size_t n;
        ShardError err;
        if (shard_urls_expand(s, &urls, &n, &err) == 0)
            shard_urls_free(urls, n);
    }
    size_t ks, kl;
    const char *field;
    if (shard_name_split(s, &ks, &kl, &field) == 0)
        (void)shard_field_equal(field, s, 1);
    (void)shard_key_check(s);
    char key[256];
    (void)shard_key_from_path(s, key, sizeof key);
    char esc[64];
    size_t len = shard_escape(s, esc, sizeof esc);
    char *all = malloc(len + 1);
    if (all) {
        if (shard_escape(s, all, len + 1) != len || strlen(all) != len)
            abort(); /* the measure and the text disagree */
        free(all);
    }
    (void)shard_url_is_remote(s);
    (void)shard_url_is_prefix(s);
    char *r = shard_url_resolve("gs://b/dir/m.json", s);
    free(r);
    r = shard_url_resolve("/local/dir/m.json", s);
    free(r);
    free(s);
    return 0;
}
