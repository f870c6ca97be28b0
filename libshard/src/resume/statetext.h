/*
 * The text a state is written in (statetext.c): "k=v,k=v" pairs, and the seal that ends it
 * (";sum=" and 16 hex digits of SHA-256 over what comes before: a state cut short or
 * edited is refused rather than continued wrong).
 */
#ifndef SHARD_RESUME_STATETEXT_H
#define SHARD_RESUME_STATETEXT_H

#include <stddef.h>

#include "base/attr.h"

#define SHARD_STATE_SUM_TAG ";sum="
/* The most pairs a state's settings hold. */
#define SHARD_STATE_PAIRS_MAX 32

typedef struct ShardStatePair {
    char key[32], value[40];
} ShardStatePair;

/* Appends the seal to the state in buf. 0, or SHARD_ERR_INVALID when it does not fit. */
SHARD_HIDDEN int shard_state_seal(char *buf, size_t size);
/* The state without its seal, malloc'd, once the seal checks (a v3 state, before seals, as
 * it is); NULL with msg (SHARD_ERROR_MAX bytes) saying why. */
SHARD_HIDDEN char *shard_state_unsealed(const char *state, char *msg);
/* Splits "k=v,k=v" (up to stop) into out (max pairs); the count, or -1 for text that is not
 * such a list. */
SHARD_HIDDEN int shard_state_pairs_parse(const char *p, const char *stop, ShardStatePair *out,
                                         int max);
/* The value of key among the n pairs, or NULL. */
SHARD_HIDDEN const char *shard_state_value(const ShardStatePair *pairs, int n, const char *key);
/* A number from the pairs into *out; def when absent; -1 when not a number. */
SHARD_HIDDEN int shard_state_number(const ShardStatePair *pairs, int n, const char *key,
                                    unsigned long long def, unsigned long long *out);

#endif /* SHARD_RESUME_STATETEXT_H */
