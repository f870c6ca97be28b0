/*
 * Canonical partitions and the cut (partition.h; formats/order.md, sections 3 and 4).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "read/partition.h"
#include "read/plan.h"
#include "shard/common.h"

uint64_t shard_partition_total(uint64_t t, uint32_t p, ShardMode mode, int pad)
{
    if (mode != SHARD_MODE_EQUAL || !p)
        return t;
    return pad ? (t + p - 1) / p * p : t - t % p;
}

void shard_partition_range(uint64_t total, uint32_t p, uint32_t i, uint64_t *a, uint64_t *b)
{
    shard_plan_split(total, p, i, a, b);
}

void shard_partition_block(uint32_t p, int world, int workers, int rank, int worker,
                           uint32_t *lo, uint32_t *hi)
{
    uint64_t rlo, rhi, wlo, whi;
    shard_plan_split(p, (uint64_t)world, (uint64_t)rank, &rlo, &rhi);
    shard_plan_split(rhi - rlo, (uint64_t)workers, (uint64_t)worker, &wlo, &whi);
    *lo = (uint32_t)(rlo + wlo);
    *hi = (uint32_t)(rlo + whi);
}

int shard_partition_check(uint32_t p, int world, int workers, ShardMode mode, char *msg)
{
    if (!p)
        return shard_fail(msg, SHARD_ERR_INVALID, "partitions: at least 1");
    if (world < 1 || workers < 1)
        return shard_fail(msg, SHARD_ERR_INVALID, "partitions: world_size and num_workers "
                                                  "are at least 1");
    uint64_t w = (uint64_t)world, lcm = p / shard_gcd(p, w) * w;
    if (mode == SHARD_MODE_EQUAL && p % w)
        return shard_fail(msg, SHARD_ERR_INVALID,
                          "partitions=%" PRIu32 " do not divide among world_size=%d ranks "
                          "(equal mode gives every rank the same number of whole partitions): "
                          "set partitions to a multiple of %d, such as %" PRIu64,
                          p, world, world, lcm);
    if ((uint64_t)workers > p / w)
        return shard_fail(msg, SHARD_ERR_INVALID,
                          "partitions=%" PRIu32 " over world_size=%d ranks leave %" PRIu64
                          " to a rank, fewer than its num_workers=%d: a worker would have "
                          "none (fewer workers, or partitions=%" PRIu64 ")",
                          p, world, p / w, workers, w * (uint64_t)workers);
    return 0;
}

/* ---- the cut --------------------------------------------------------------------------- */

/* 'd' done, '0' untouched, 'n' in part (an empty partition is done). */
static char kind(uint64_t pos, uint64_t len)
{
    return pos >= len ? 'd' : pos == 0 ? '0' : 'n';
}

int shard_cut_format(const uint64_t *pos, const uint64_t *len, uint32_t p, char *out,
                     size_t cap)
{
    size_t at = 0;
    if (cap)
        out[0] = 0;
    for (uint32_t i = 0; i < p;) {
        char k = kind(pos[i], len[i]);
        uint32_t j = i + 1;
        if (k != 'n')
            while (j < p && kind(pos[j], len[j]) == k)
                j++;
        int n;
        const char *sep = at ? "," : "";
        if (k == 'n')
            n = snprintf(out + at, cap - at, "%s%" PRIu32 ":%" PRIu64, sep, i, pos[i]);
        else if (j - i == 1)
            n = snprintf(out + at, cap - at, "%s%" PRIu32 ":%c", sep, i, k);
        else
            n = snprintf(out + at, cap - at, "%s%" PRIu32 "-%" PRIu32 ":%c", sep, i, j - 1, k);
        if (n < 0 || (size_t)n >= cap - at)
            return SHARD_ERR_INVALID;
        at += (size_t)n;
        i = j;
    }
    return 0;
}

/* A decimal number at *s, moving past it; -1 when there is none or it overflows. */
static int number(const char **s, uint64_t *v)
{
    if (**s < '0' || **s > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long x = strtoull(*s, &end, 10);
    if (errno)
        return -1;
    *s = end;
    *v = x;
    return 0;
}

int shard_cut_parse(const char *text, const uint64_t *len, uint32_t p, uint64_t *pos, char *msg)
{
    const char *s = text;
    uint64_t next = 0;
    while (*s) {
        const char *run = s;
        uint64_t a, b, n = 0;
        if (number(&s, &a))
            goto bad;
        b = a;
        if (*s == '-') {
            s++;
            if (number(&s, &b))
                goto bad;
        }
        if (*s++ != ':')
            goto bad;
        char k = *s;
        if (k == 'd' || (k == '0' && (s[1] == ',' || !s[1])))
            s++;
        else if (a != b || number(&s, &n))
            goto bad;
        else
            k = 'n';
        if (*s == ',' && s[1])
            s++;
        else if (*s)
            goto bad;
        if (a != next || b < a || b >= p)
            return shard_fail(msg, SHARD_ERR_INVALID,
                              "the cut's run '%.*s' is not partition %" PRIu64 " onwards of %" PRIu32,
                              (int)strcspn(run, ","), run, next, p);
        for (uint64_t i = a; i <= b; i++)
            pos[i] = k == 'd' ? len[i] : k == '0' ? 0 : n;
        if (k == 'n' && n > len[a])
            return shard_fail(msg, SHARD_ERR_INVALID,
                              "the cut delivers %" PRIu64 " samples of partition %" PRIu64
                              ", which has %" PRIu64,
                              n, a, len[a]);
        next = b + 1;
    }
    if (next != p)
        return shard_fail(msg, SHARD_ERR_INVALID,
                          "the cut covers %" PRIu64 " partitions of %" PRIu32, next, p);
    return 0;
bad:
    return shard_fail(msg, SHARD_ERR_INVALID,
                      "the cut '%.80s' is not runs of partitions (A-B:d, A-B:0, I:N)", text);
}

int shard_cut_advance(uint64_t *pos, const uint64_t *len, uint32_t p, int world, int workers,
                      uint64_t batch_size, int drop_last, uint64_t batches, int first)
{
    if (!batch_size || world < 1 || workers < 1)
        return SHARD_ERR_INVALID;
    uint64_t *left = malloc((size_t)workers * 2 * sizeof *left);
    if (!left)
        return SHARD_ERR_NOMEM;
    uint64_t *got = left + workers;
    for (int r = 0; r < world; r++) {
        /* each worker's batches still to come, and how many of them it delivered */
        for (int w = 0; w < workers; w++) {
            uint32_t lo, hi;
            shard_partition_block(p, world, workers, r, w, &lo, &hi);
            uint64_t rest = 0;
            for (uint32_t i = lo; i < hi; i++)
                rest += len[i] - pos[i];
            left[w] = drop_last ? rest / batch_size : (rest + batch_size - 1) / batch_size;
            got[w] = 0;
        }
        /* whole turns over the workers that still have batches, each giving one; a worker
         * ends only at a turn's end, so the last, partial turn starts at `first` again */
        uint64_t todo = batches;
        for (;;) {
            uint64_t active = 0, least = UINT64_MAX;
            for (int w = 0; w < workers; w++)
                if (got[w] < left[w]) {
                    active++;
                    least = left[w] - got[w] < least ? left[w] - got[w] : least;
                }
            if (!active || !todo)
                break;
            uint64_t turns = todo / active < least ? todo / active : least;
            if (!turns) { /* a partial turn, from first */
                for (int k = 0; k < workers && todo; k++) {
                    int w = (first + k) % workers;
                    if (got[w] < left[w]) {
                        got[w]++;
                        todo--;
                    }
                }
                break;
            }
            for (int w = 0; w < workers; w++)
                if (got[w] < left[w])
                    got[w] += turns;
            todo -= turns * active;
        }
        for (int w = 0; w < workers; w++) { /* its samples, partition after partition */
            uint32_t lo, hi;
            shard_partition_block(p, world, workers, r, w, &lo, &hi);
            uint64_t n = got[w] * batch_size;
            for (uint32_t i = lo; i < hi && n; i++) {
                uint64_t take = len[i] - pos[i] < n ? len[i] - pos[i] : n;
                pos[i] += take;
                n -= take;
            }
        }
    }
    free(left);
    return 0;
}
