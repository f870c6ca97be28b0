/*
 * Canonical partitions and the cut (partition.h; formats/order.md, sections 3 and 4).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/text.h"
#include "resume/partition.h"
#include "shard/common.h"

uint64_t shard_gcd(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

void shard_plan_split(uint64_t total, uint64_t m, uint64_t k, uint64_t *lo, uint64_t *hi)
{
    uint64_t q = total / m, r = total % m;
    *lo = k * q + (k < r ? k : r);
    *hi = *lo + q + (k < r);
}

uint64_t shard_partition_total(uint64_t t, uint32_t p, ShardMode mode, int pad)
{
    if (mode != SHARD_MODE_EQUAL || !p)
        return t;
    return pad ? (t + p - 1) / p * p : t - t % p;
}

/* The start of partition i: the remainder's extra samples spread evenly (i x r / p), so
 * that any run of partitions of a length holds as many of them as any other, one apart:
 * ranks and workers, whatever their count, get samples one apart. */
static uint64_t partition_start(uint64_t total, uint32_t p, uint64_t i)
{
    uint64_t q = total / p, r = total % p;
    return i * q + (uint64_t)((unsigned __int128)i * r / p);
}

void shard_partition_range(uint64_t total, uint32_t p, uint32_t i, uint64_t *a, uint64_t *b)
{
    *a = partition_start(total, p, i);
    *b = partition_start(total, p, (uint64_t)i + 1);
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

int shard_partition_whole(uint32_t p, int world, int workers, ShardMode mode)
{
    uint64_t w = (uint64_t)world;
    return p >= w * (uint64_t)workers && (mode != SHARD_MODE_EQUAL || p % w == 0);
}

/* Partition counts with many divisors, largest first (2880 = 2^6 x 3^2 x 5). */
static const uint32_t AUTO_COUNTS[] = {2880, 1440, 720, 360, 240, 120, 60, 24, 12, 6, 2, 1};

/* Numbers with many divisors, for the partitions a rank takes where the count above does
 * not fit the world size. */
static const uint32_t PER_RANK[] = {1, 2, 3, 4, 6, 12, 24, 36, 48, 60, 120, 180, 240, 360,
                                    720, 1440, 2880, 5040, 10080};

/* Whether p gives every worker of every rank the same number of partitions. */
static int fits(uint64_t p, int world, int workers)
{
    return p % ((uint64_t)world * (uint64_t)workers) == 0;
}

uint32_t shard_partition_auto(uint64_t t, int counted, size_t nshards, size_t shuffle,
                              size_t streams, int world, int workers, ShardMode mode)
{
    /* long enough to shuffle as the buffer can, and to interleave `streams` shards */
    uint64_t least = shuffle > 256 ? shuffle : 256;
    if (counted && nshards && streams * ((t + nshards - 1) / nshards) > least)
        least = streams * ((t + nshards - 1) / nshards);
    uint64_t p = 1;
    for (size_t i = 0; i < sizeof AUTO_COUNTS / sizeof *AUTO_COUNTS; i++) {
        uint64_t c = AUTO_COUNTS[i];
        if (counted ? t / c >= least : nshards / c >= 1) {
            p = c;
            break;
        }
    }
    (void)mode;
    if (world < 1 || workers < 1 || fits(p, world, workers))
        return (uint32_t)p;
    /* every worker the same number of partitions, a rank's count one with many divisors */
    uint64_t w = (uint64_t)world, k = (uint64_t)workers, per = (p + w - 1) / w;
    uint64_t chosen = (per + k - 1) / k * k;
    for (size_t i = 0; i < sizeof PER_RANK / sizeof *PER_RANK; i++)
        if (PER_RANK[i] >= per && PER_RANK[i] % k == 0) {
            chosen = PER_RANK[i];
            break;
        }
    p = chosen * w;
    return p > SHARD_PARTITIONS_MAX ? SHARD_PARTITIONS_MAX : (uint32_t)p;
}

/* ---- the runs --------------------------------------------------------------------------- */

/* 'd' done, '0' untouched, 'n' in part (an empty partition is done), '?' not said; with
 * len NULL every value is a number. */
static char kind(uint64_t pos, const uint64_t *len, uint32_t i)
{
    if (pos == SHARD_CUT_UNKNOWN)
        return '?';
    if (!len)
        return pos ? 'n' : '0';
    if (pos == SHARD_CUT_DONE || (len[i] != SHARD_COUNT_UNKNOWN && pos >= len[i]))
        return 'd';
    return pos == 0 ? '0' : 'n';
}

int shard_runs_format(const uint64_t *pos, const uint64_t *len, uint32_t p, char *out,
                     size_t cap)
{
    size_t at = 0;
    if (cap)
        out[0] = 0;
    for (uint32_t i = 0; i < p;) {
        char k = kind(pos[i], len, i);
        uint32_t j = i + 1;
        while (j < p && kind(pos[j], len, j) == k && (k != 'n' || pos[j] == pos[i]))
            j++;
        char value[24];
        if (k == 'n')
            snprintf(value, sizeof value, "%" PRIu64, pos[i]);
        else
            snprintf(value, sizeof value, "%c", k);
        int n;
        const char *sep = at ? "," : "";
        if (j - i == 1)
            n = snprintf(out + at, cap - at, "%s%" PRIu32 ":%s", sep, i, value);
        else
            n = snprintf(out + at, cap - at, "%s%" PRIu32 "-%" PRIu32 ":%s", sep, i, j - 1, value);
        if (n < 0 || (size_t)n >= cap - at)
            return SHARD_ERR_INVALID;
        at += (size_t)n;
        i = j;
    }
    return 0;
}

int shard_runs_parse(const char *text, const uint64_t *len, uint32_t p, uint64_t *pos, char *msg)
{
    const char *s = text;
    uint64_t next = 0;
    while (*s) {
        const char *run = s;
        uint64_t a, b, n = 0;
        if (shard_text_u64(&s, &a))
            goto bad;
        b = a;
        if (*s == '-') {
            s++;
            if (shard_text_u64(&s, &b))
                goto bad;
        }
        if (*s++ != ':')
            goto bad;
        char k = *s;
        if ((k == 'd' && len) || k == '?' || (k == '0' && (s[1] == ',' || !s[1])))
            s++;
        else if (shard_text_u64(&s, &n))
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
        for (uint64_t i = a; i <= b; i++) {
            if (k == 'n' && len && len[i] != SHARD_COUNT_UNKNOWN && n > len[i])
                return shard_fail(msg, SHARD_ERR_INVALID,
                                  "the cut delivers %" PRIu64 " samples of partition %" PRIu64
                                  ", which has %" PRIu64,
                                  n, i, len[i]);
            if (k == 'd')
                pos[i] = len[i] == SHARD_COUNT_UNKNOWN ? SHARD_CUT_DONE : len[i];
            else
                pos[i] = k == '?' ? SHARD_CUT_UNKNOWN : k == '0' ? 0 : n;
        }
        next = b + 1;
    }
    if (next != p)
        return shard_fail(msg, SHARD_ERR_INVALID,
                          "the cut covers %" PRIu64 " partitions of %" PRIu32, next, p);
    return 0;
bad:
    return shard_fail(msg, SHARD_ERR_INVALID,
                      "the cut '%.80s' is not runs of partitions (A-B:d, A-B:0, A-B:N, A-B:?)",
                      text);
}
