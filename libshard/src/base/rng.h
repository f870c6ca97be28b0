/*
 * The random numbers behind every shuffle: splitmix64 to derive seeds, xoshiro256** to
 * draw, Lemire's method for unbiased ranges. Fixed algorithms, so a seed means the same
 * sequence in every version and on every machine.
 */
#ifndef SHARD_BASE_RNG_H
#define SHARD_BASE_RNG_H

#include <stdint.h>

typedef struct ShardRng {
    uint64_t s[4];
} ShardRng;

static inline uint64_t shard_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A generator seeded from seed alone (splitmix64 four times): the pack plan's shuffle. */
static inline void shard_rng_seed(ShardRng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = shard_splitmix64(&x);
}

/* A generator for a purpose: the seed mixed with up to four numbers (epoch, rank, ...). */
static inline void shard_rng_init(ShardRng *r, uint64_t seed, uint64_t a, uint64_t b, uint64_t c,
                                  uint64_t d)
{
    uint64_t x = seed;
    uint64_t parts[4] = {a, b, c, d};
    for (int i = 0; i < 4; i++) {
        x ^= shard_splitmix64(&x) + parts[i] * 0xd1342543de82ef95ull;
    }
    for (int i = 0; i < 4; i++)
        r->s[i] = shard_splitmix64(&x);
}

static inline uint64_t shard_rng_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t shard_rng_next(ShardRng *r)
{
    uint64_t *s = r->s;
    uint64_t out = shard_rng_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = shard_rng_rotl(s[3], 45);
    return out;
}

/* Uniform in [0, n), n > 0. */
static inline uint64_t shard_rng_below(ShardRng *r, uint64_t n)
{
    __uint128_t m = (__uint128_t)shard_rng_next(r) * n;
    uint64_t lo = (uint64_t)m;
    if (lo < n) {
        uint64_t t = -n % n;
        while (lo < t) {
            m = (__uint128_t)shard_rng_next(r) * n;
            lo = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

/* Purposes, so generators for different jobs never share a stream. */
enum {
    SHARD_RNG_SHARDS = 1,         /* the epoch's shard order */
    SHARD_RNG_BUFFER = 2,         /* the shuffle buffer's draws */
    SHARD_RNG_RESAMPLE = 3,       /* resampled mode's shard draws */
    SHARD_RNG_MIX = 4,            /* the places of mixed sources' samples in an epoch */
    SHARD_RNG_AUGMENT = 0xa116e,  /* a sample's seed for its augmentation (load/producer.c) */
    SHARD_RNG_CROP = 0x5eed,      /* the draws from that seed: crop box and flip (decode/crop.c) */
};

#endif /* SHARD_BASE_RNG_H */
