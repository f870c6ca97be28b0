/*
 * An epoch's readings on the topologies it ran on (history.h), and their text in a state.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "resume/history.h"

void shard_history_free(ShardHistory *h)
{
    for (size_t i = 0; i < h->n; i++)
        free(h->v[i].cut);
    memset(h, 0, sizeof *h);
}

int shard_history_add(ShardHistory *h, uint64_t step, int world, int workers, const char *cut)
{
    char *c = cut ? strdup(cut) : NULL;
    if (cut && !c)
        return SHARD_ERR_NOMEM;
    if (h->n == SHARD_HISTORY_MAX) {
        free(h->v[0].cut);
        memmove(h->v, h->v + 1, (h->n - 1) * sizeof *h->v);
        h->n--;
        h->dropped = 1;
    }
    h->v[h->n++] = (ShardReading){step, world, workers, c};
    return 0;
}

int shard_history_copy(ShardHistory *dst, const ShardHistory *src)
{
    shard_history_free(dst);
    for (size_t i = 0; i < src->n; i++)
        if (shard_history_add(dst, src->v[i].step, src->v[i].world, src->v[i].workers,
                              src->v[i].cut)) {
            shard_history_free(dst);
            return SHARD_ERR_NOMEM;
        }
    dst->dropped = src->dropped;
    return 0;
}

int shard_history_format(const ShardHistory *h, char *buf, size_t size)
{
    size_t at = strlen(buf);
    for (size_t i = 0; i < h->n; i++) {
        const ShardReading *g = &h->v[i];
        int k = snprintf(buf + at, size - at, "%s%llu@%d.%d@", i ? "|" : "",
                         (unsigned long long)g->step, g->world, g->workers);
        if (k < 0 || (size_t)k >= size - at)
            return SHARD_ERR_INVALID;
        at += (size_t)k;
        const char *c = g->cut ? g->cut : "-";
        size_t len = strlen(c);
        if (len + 1 > size - at)
            return SHARD_ERR_INVALID;
        for (size_t j = 0; j < len; j++) /* the state's sections are ';'-separated */
            buf[at + j] = c[j] == ';' ? '/' : c[j];
        at += len;
        buf[at] = 0;
    }
    return 0;
}

int shard_history_parse(ShardHistory *h, const char *text, char *msg)
{
    memset(h, 0, sizeof *h);
    const char *p = text;
    while (*p) {
        unsigned long long step;
        int world, workers, at = 0;
        if (*p < '0' || *p > '9' || /* no sign: sscanf would take one */
            sscanf(p, "%llu@%d.%d@%n", &step, &world, &workers, &at) != 3 || !at ||
            world < 1 || workers < 1 || world > SHARD_HISTORY_WORLD_MAX ||
            workers > SHARD_HISTORY_WORKERS_MAX ||
            (long long)world * workers > SHARD_HISTORY_CONSUMERS_MAX ||
            (h->n && step < h->v[h->n - 1].step)) {
            shard_history_free(h);
            return shard_fail(msg, SHARD_ERR_INVALID, "reader: the state's resumes '%.80s' "
                              "are not STEP@RANKS.WORKERS@CUT, steps in order and topologies "
                              "a job can have", p);
        }
        p += at;
        size_t len = strcspn(p, "|");
        char *cut = NULL;
        if (!(len == 1 && *p == '-')) {
            if (!(cut = strndup(p, len))) {
                shard_history_free(h);
                return SHARD_ERR_NOMEM;
            }
            for (char *c = cut; *c; c++)
                *c = *c == '/' ? ';' : *c;
        }
        int rc = shard_history_add(h, step, world, workers, cut);
        free(cut);
        if (rc) {
            shard_history_free(h);
            return rc;
        }
        p += len;
        if (*p == '|')
            p++;
    }
    return 0;
}
