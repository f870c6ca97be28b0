/*
 * Brace patterns as WebDataset (braceexpand) writes them (braces.c): {000..123} ranges,
 * zero-padded from the wider bound, and {a,b,c} alternatives, nested, expanded left to
 * right.
 */
#ifndef SHARD_CATALOG_BRACES_H
#define SHARD_CATALOG_BRACES_H

#include "base/attr.h"

/* the most names one range may give: a typo ({0..9999999999}) fails instead of filling
 * memory */
#define SHARD_BRACES_MAX_RANGE 10000000ull

/* Called with each name a pattern expands to (malloc'd, taken by the callee; NULL when
 * out of memory): 0 to go on, or an error code with err. */
typedef int (*ShardNameFn)(void *cookie, char *name, char *err);

/* Expands pattern, handing each name to add in order. spec names the pattern in messages.
 * @return 0, add's error, or SHARD_ERR_FORMAT with err (an unmatched brace, a range that
 *         is not one, or one too large) */
SHARD_HIDDEN int shard_braces_expand(const char *pattern, const char *spec, ShardNameFn add,
                                     void *cookie, char *err);

#endif /* SHARD_CATALOG_BRACES_H */
