/*
 * Exact duplicates among a plan's inputs (dedup.h), found by content: inputs of one size are
 * told apart by a digest of their first 4 KiB, and only those still alike are hashed whole
 * (SHA-256), so a collection of distinct photographs costs a read of 4 KiB of each file
 * whose size another shares. The first of equal inputs in input order is kept: the plan
 * is the same for any --jobs and any machine.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/digest.h"
#include "base/error.h"
#include "pack/dedup.h"
#include "pack/packplandef.h"
#include "remote/store.h"

#define HEAD_BYTES 4096

typedef struct Cand {
    size_t i;           /* the input's place in p->v */
    uint64_t size;
    char head[65], sum[65]; /* hex SHA-256 of the first HEAD_BYTES, of the whole ("" unread) */
} Cand;

static int by_size(const void *a, const void *b)
{
    const Cand *x = a, *y = b;
    if (x->size != y->size)
        return x->size < y->size ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* SHA-256 of path's first limit bytes (limit 0: all) into hex; -1 when it cannot be read
 * (the writer names it when it packs that input). path is a local input's, opened as the
 * writer opens it (packshard.c). */
static int digest_of(const char *path, uint64_t limit, unsigned char *buf, size_t cap, char hex[65])
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ShardDigests d;
    if (shard_digests_init(&d, 0, 1)) {
        close(fd);
        return -1;
    }
    uint64_t done = 0;
    ssize_t k = 0;
    while (!limit || done < limit) {
        size_t want = limit && limit - done < cap ? (size_t)(limit - done) : cap;
        k = read(fd, buf, want);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        shard_digests_update(&d, buf, (size_t)k);
        done += (uint64_t)k;
    }
    close(fd);
    char md5[33];
    shard_digests_final(&d, md5, hex);
    return k < 0 ? -1 : 0;
}

/* Within c[lo, hi) (one size, in input order): each input equal to an earlier one marked
 * in dup[] with the earlier's place. */
static void mark_group(const ShardPackPlan *p, Cand *c, size_t lo, size_t hi, size_t *dup,
                       unsigned char *buf, size_t cap)
{
    for (size_t a = lo; a < hi; a++)
        if (digest_of(p->v[c[a].i].path, HEAD_BYTES, buf, cap, c[a].head))
            c[a].head[0] = 0;
    for (size_t a = lo; a < hi; a++) {
        if (!c[a].head[0] || dup[c[a].i] != (size_t)-1)
            continue;
        for (size_t b = a + 1; b < hi; b++) {
            if (dup[c[b].i] != (size_t)-1 || strcmp(c[a].head, c[b].head))
                continue;
            if (!c[a].sum[0] && digest_of(p->v[c[a].i].path, 0, buf, cap, c[a].sum))
                break;
            if (!c[b].sum[0] && digest_of(p->v[c[b].i].path, 0, buf, cap, c[b].sum))
                continue;
            if (!strcmp(c[a].sum, c[b].sum))
                dup[c[b].i] = c[a].i;
        }
    }
}

int shard_pack_dedup(ShardPackPlan *p, ShardError *err)
{
    for (size_t i = 0; i < p->n; i++)
        if (shard_store_can(p->v[i].path) & SHARD_STORE_COSTLY) {
            char msg[SHARD_ERROR_MAX];
            shard_fail(msg, SHARD_ERR_INVALID, "pack: dedup reads local inputs only, and %s is "
                       "remote: copy the inputs to a local folder, or pack without dedup",
                       p->v[i].path);
            return shard_report(err, SHARD_ERR_INVALID, msg);
        }
    size_t cap = 1 << 20;
    Cand *c = calloc(p->n ? p->n : 1, sizeof *c);
    size_t *dup = malloc((p->n ? p->n : 1) * sizeof *dup);
    unsigned char *buf = malloc(cap);
    if (!c || !dup || !buf) {
        free(c), free(dup), free(buf);
        return shard_report(err, SHARD_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < p->n; i++) {
        c[i] = (Cand){.i = i, .size = p->v[i].in.size};
        dup[i] = (size_t)-1;
    }
    qsort(c, p->n, sizeof *c, by_size);
    for (size_t lo = 0, hi; lo < p->n; lo = hi) {
        for (hi = lo + 1; hi < p->n && c[hi].size == c[lo].size; hi++)
            ;
        if (hi - lo > 1 && c[lo].size > 0)
            mark_group(p, c, lo, hi, dup, buf, cap);
    }
    size_t ndup = 0;
    for (size_t i = 0; i < p->n; i++)
        ndup += dup[i] != (size_t)-1;
    int rc = 0;
    if (ndup && !(p->dups = calloc(ndup, sizeof *p->dups)))
        rc = shard_report(err, SHARD_ERR_NOMEM, "out of memory");
    /* the sums, by input, for the report */
    char (*sum)[65] = rc ? NULL : calloc(p->n ? p->n : 1, sizeof *sum);
    if (!rc && !sum)
        rc = shard_report(err, SHARD_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < p->n && !rc; k++)
        memcpy(sum[c[k].i], c[k].sum, 65);
    /* the list first, while the inputs are where dup[] says: a duplicate's kept path is the
     * kept input's own string, which stays when the inputs close up */
    for (size_t i = 0; i < p->n && !rc; i++) {
        if (dup[i] == (size_t)-1)
            continue;
        ShardPackDup *d = &p->dups[p->ndups++];
        d->dropped = p->v[i];
        d->kept = p->v[dup[i]].path;
        d->kept_label = p->v[dup[i]].in.label;
        memcpy(d->sha256, sum[i], 65);
    }
    size_t w = 0;
    for (size_t i = 0; i < p->n && !rc; i++)
        if (dup[i] == (size_t)-1)
            p->v[w++] = p->v[i];
    if (!rc)
        p->n = w;
    free(sum);
    free(c);
    free(dup);
    free(buf);
    return rc;
}
