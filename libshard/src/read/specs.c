/*
 * A reader's shard specs copied (specs.h).
 */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "read/specs.h"

void shard_reader_specs_free(ShardReaderSpecs *sp)
{
    for (size_t i = 0; sp->urls && i < sp->nurls; i++)
        free(sp->urls[i]);
    free(sp->urls);
    for (size_t i = 0; sp->source_urls && i < sp->nsources; i++) {
        for (size_t k = 0; sp->source_urls[i] && k < sp->sources[i].nurls; k++)
            free(sp->source_urls[i][k]);
        free(sp->source_urls[i]);
    }
    free(sp->source_urls);
    free(sp->sources);
    free(sp->index_cache);
    memset(sp, 0, sizeof *sp);
}

static char **copy_strings(const char *const *v, size_t n)
{
    char **c = calloc(n ? n : 1, sizeof *c);
    for (size_t i = 0; c && i < n; i++)
        if (!(c[i] = strdup(v[i]))) {
            while (i--)
                free(c[i]);
            free(c);
            return NULL;
        }
    return c;
}

int shard_reader_specs_copy(ShardReaderSpecs *sp, const ShardReaderSettings *s)
{
    memset(sp, 0, sizeof *sp);
    if (!(sp->urls = copy_strings(s->urls, s->nurls)))
        return SHARD_ERR_NOMEM;
    sp->nurls = s->nurls;
    if (s->nsources) {
        sp->sources = calloc(s->nsources, sizeof *sp->sources);
        sp->source_urls = calloc(s->nsources, sizeof *sp->source_urls);
        if (!sp->sources || !sp->source_urls)
            return SHARD_ERR_NOMEM;
        sp->nsources = s->nsources;
        for (size_t i = 0; i < s->nsources; i++) {
            if (!(sp->source_urls[i] = copy_strings(s->sources[i].urls, s->sources[i].nurls)))
                return SHARD_ERR_NOMEM;
            sp->sources[i] = s->sources[i];
            sp->sources[i].urls = (const char *const *)sp->source_urls[i];
        }
    }
    if (s->index_cache && !(sp->index_cache = strdup(s->index_cache)))
        return SHARD_ERR_NOMEM;
    return 0;
}
