/*
 * The shuffle buffer, as WebDataset's shuffle(size, initial): fill to `initial` samples,
 * then each step draws one at random and puts the next incoming sample in its place. The
 * draws come from a seeded generator, so the order depends only on the seed and the
 * incoming sequence; the same steps replay on sample identities alone (a resume), after
 * which the identities still in the buffer are read by index (shard_shuffle_load).
 *
 * The buffer also bounds memory: samples that view a mapped shard hold it, and the
 * buffer's stragglers could keep every shard of an epoch mapped. The shards the streams
 * have moved past wait in a FIFO; once more than `keep` wait there, the oldest one's
 * stragglers get copies of their bytes and the shard is let go.
 */
#ifndef SHARD_READ_SHUFFLE_H
#define SHARD_READ_SHUFFLE_H

#include "base/attr.h"
#include "base/rng.h"
#include "shard/list.h"
#include "shard/reader.h"
#include "tar/item.h"

/* The next incoming sample, NULL at the end (with *rc 0) or on failure (*rc set). */
typedef ShardItem *(*ShardPullFn)(void *cookie, int *rc);

typedef struct ShardShuffle {
    size_t size, initial; /* 0: no buffer, samples pass straight through */
    ShardRng rng;
    ShardItem **buf;
    size_t n;
    int src_done;         /* the incoming sequence has ended */
    ShardHold **fin;      /* shards the streams have moved past, oldest first (held) */
    size_t nfin, keep;
    uint64_t *sizes;      /* each slot's sample bytes */
    uint64_t held, limit; /* bytes in the buffer, and the most it may hold (0: no bound) */
    int over;             /* the last step failed on the limit */
} ShardShuffle;

/* A buffer of size samples (initial before the first out); limit: the most bytes they may
 * hold together (0: no bound), past which a step fails with SHARD_ERR_INVALID and over
 * set, as the samples a buffer holds are the settings' to bound, not the data's. */
SHARD_HIDDEN int shard_shuffle_init(ShardShuffle *sh, size_t size, size_t initial, size_t keep,
                                    uint64_t limit);
/* Empties the buffer and the FIFO and seeds the draws for a new epoch. */
SHARD_HIDDEN void shard_shuffle_reset(ShardShuffle *sh, const ShardRng *rng);
/* The next sample out of the buffer (owned by the caller); NULL at the end or on failure. */
SHARD_HIDDEN ShardItem *shard_shuffle_step(ShardShuffle *sh, ShardPullFn pull, void *cookie,
                                           int *rc);
/* A stream's samples now come from next's storage (NULL: none) after *last's: the old one
 * joins the FIFO. *last is the stream's own slot, holding a reference. */
SHARD_HIDDEN void shard_shuffle_moved_on(ShardShuffle *sh, ShardHold **last, ShardHold *next);
/* Replaces the identities in the buffer (shard_item_identity) by the samples: each shard's
 * in index order in one pass, reading through short gaps and seeking by index over longer
 * ones (without an index, reading up to them). err names what failed. */
/* The identities among buf[0..n) replaced by their samples, as shard_shuffle_load reads them;
 * sizes (NULL: none) receives each loaded sample's bytes at its place. With a view (keys;
 * NULL: none), an identity's number is its shard's chosen sample's. */
struct ShardKeyView;
SHARD_HIDDEN int shard_items_load(ShardItem **buf, uint64_t *sizes, size_t n,
                                  const ShardList *list, const struct ShardKeyView *view,
                                  ShardRemote *remote, char *err);
SHARD_HIDDEN int shard_shuffle_load(ShardShuffle *sh, const ShardList *list,
                                    const struct ShardKeyView *view, ShardRemote *remote,
                                    char *err);
/* Releases the buffered samples and the FIFO's holds. */
SHARD_HIDDEN void shard_shuffle_clear(ShardShuffle *sh);
SHARD_HIDDEN void shard_shuffle_free(ShardShuffle *sh);

/* The most the shuffle buffer of a reader with settings s may hold, in bytes: counted
 * apart from the streams', it follows the shuffle asked for (shuffle_buffer x 4 MiB, at
 * most an eighth of the machine's memory), memory_budget at least; 0 (unbounded) with
 * memory_budget 0. */
SHARD_HIDDEN uint64_t shard_shuffle_limit(const ShardReaderSettings *s);
#endif /* SHARD_READ_SHUFFLE_H */
