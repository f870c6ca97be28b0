/* The fetch stage's pool of sample blocks (libshard/src/blockpool.h): a block given back is
 * handed out again, only to a request it fits without waste, within the pool's bounds, and
 * blocks given back after the pool's owner let go are still taken in. */
#include <criterion/criterion.h>
#include <string.h>

#include "base/blockpool.h"

TestSuite(blockpool, .timeout = 30);

Test(blockpool, a_block_given_back_is_reused)
{
    ShardBlockPool *p = shard_block_pool_new(4, 1 << 20);
    size_t cap;
    void *a = shard_block_get(p, 10000, &cap);
    cr_assert_not_null(a);
    cr_assert_geq(cap, 10000);
    memset(a, 1, cap);
    shard_block_put(p, a, cap);
    size_t cap2;
    void *b = shard_block_get(p, 9000, &cap2);
    cr_assert_eq(b, a, "the kept block comes back");
    cr_assert_eq(cap2, cap);
    void *c = shard_block_get(p, 9000, &cap2);
    cr_assert_neq(c, a, "a block is handed out once");
    shard_block_put(p, b, cap);
    shard_block_put(p, c, cap2);
    shard_block_pool_unref(p);
}

Test(blockpool, the_smallest_fitting_block_and_never_one_twice_too_big)
{
    ShardBlockPool *p = shard_block_pool_new(8, 8 << 20);
    size_t cs, cm, cl;
    void *s = shard_block_get(p, 8192, &cs);
    void *m = shard_block_get(p, 40000, &cm);
    void *l = shard_block_get(p, 400000, &cl);
    shard_block_put(p, l, cl);
    shard_block_put(p, m, cm);
    shard_block_put(p, s, cs);
    size_t cap;
    void *got = shard_block_get(p, 30000, &cap);
    cr_assert_eq(got, m, "the middle one fits best");
    void *small = shard_block_get(p, 5000, &cap);
    cr_assert_eq(small, s);
    void *fresh = shard_block_get(p, 100000, &cap);
    cr_assert_neq(fresh, l, "400 KB is more than twice 100 KB: a new block");
    shard_block_put(p, got, cm);
    shard_block_put(p, small, cs);
    shard_block_put(p, fresh, cap);
    shard_block_pool_unref(p);
}

Test(blockpool, a_small_request_takes_a_kept_small_block)
{
    /* a sample's first bytes (its names, a few hundred) come before its data: a new block
     * for them is a small one, so a kept small one serves them, or the pool fills with
     * small blocks nobody takes */
    ShardBlockPool *p = shard_block_pool_new(4, 1 << 20);
    size_t cap;
    void *a = shard_block_get(p, 251, &cap);
    cr_assert_not_null(a);
    shard_block_put(p, a, cap);
    size_t cap2;
    void *b = shard_block_get(p, 100, &cap2);
    cr_assert_eq(b, a, "a %zu-byte block serves a 100-byte request", cap);
    cr_assert_eq(cap2, cap);
    shard_block_put(p, b, cap2);
    shard_block_pool_unref(p);
}

Test(blockpool, bounds_drop_the_oldest)
{
    ShardBlockPool *p = shard_block_pool_new(2, 1 << 20);
    void *b[3];
    size_t c[3];
    for (int i = 0; i < 3; i++)
        b[i] = shard_block_get(p, 16384, &c[i]);
    for (int i = 0; i < 3; i++)
        shard_block_put(p, b[i], c[i]); /* the third drops the first */
    size_t cap;
    void *x = shard_block_get(p, 16384, &cap), *y = shard_block_get(p, 16384, &cap);
    cr_assert((x == b[1] && y == b[2]) || (x == b[2] && y == b[1]));
    shard_block_put(p, x, cap);
    shard_block_put(p, y, cap);
    /* over the byte bound: not kept */
    void *big = shard_block_get(p, 2 << 20, &cap);
    shard_block_put(p, big, cap);
    size_t cap2;
    void *again = shard_block_get(p, 2 << 20, &cap2);
    shard_block_put(p, again, cap2);
    shard_block_pool_unref(p);
}

Test(blockpool, blocks_out_keep_the_pool)
{
    ShardBlockPool *p = shard_block_pool_new(4, 1 << 20);
    size_t cap;
    void *a = shard_block_get(p, 20000, &cap);
    ShardBlockPool *held = shard_block_pool_ref(p); /* as a sample holds it */
    shard_block_pool_unref(p);                      /* its stage is gone */
    shard_block_put(held, a, cap);                  /* (ASan: no use after free) */
    size_t cap2;
    cr_assert_eq(shard_block_get(held, 20000, &cap2), a);
    shard_block_put(held, a, cap2);
    shard_block_pool_unref(held);
    /* no pool at all: plain malloc and free */
    void *m = shard_block_get(NULL, 100, &cap);
    cr_assert_not_null(m);
    cr_assert_geq(cap, 100);
    shard_block_put(NULL, m, cap);
}
