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

/* A state's text as its version frames it (formats/order.md, section 4): pointers into the
 * text shard_state_open returns. */
typedef struct ShardStateForm {
    int version;                   /* 3 or 4 */
    unsigned long long epoch, seed;
    const char *pairs, *pairs_end; /* the settings' "k=v,..." up to ';' (NULL: none) */
    const char *cut;               /* a line's cut, "left=...;edges=...", or NULL */
    const char *runs;              /* the cut as runs of partitions, or NULL */
    const char *runs_tag;          /* what the version writes before runs ("parts=", v3 "") */
    const char *resumes;           /* the epoch's readings (history.h), or NULL */
} ShardStateForm;

/* Appends the seal to the state in buf. 0, or SHARD_ERR_INVALID when it does not fit. */
SHARD_HIDDEN int shard_state_seal(char *buf, size_t size);
/* The one place that knows each version of the state: state opened, its seal checked (v4;
 * v3 had none), its framing read into *f. The text without its seal, malloc'd, f pointing
 * into it; NULL with msg (SHARD_ERROR_MAX bytes) saying why: the states of the orders
 * before partitions (v1, v2) refused saying how to go on, anything else not a state of a
 * version this libshard reads. */
SHARD_HIDDEN char *shard_state_open(const char *state, ShardStateForm *f, char *msg);
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
