/*
 * The extents of JSON values in a text, found without building them: a manifest's shard
 * list is parsed one element at a time (jansson on each slice), so that its memory is the
 * text's and the entries', not a tree of the whole.
 */
#ifndef SHARD_CATALOG_JSONSCAN_H
#define SHARD_CATALOG_JSONSCAN_H

#include <stddef.h>

#include "base/attr.h"

/* The most arrays and objects one value may nest. */
#define SHARD_JSON_MAX_DEPTH 256

/* Skips JSON whitespace from *pos. */
SHARD_HIDDEN void shard_json_ws(const char *text, size_t len, size_t *pos);

/* The end of the value starting at pos (after whitespace): 0 with *end set; -1 for text
 * that is no value (its syntax is left to the parser of the slice), -2 for one nested
 * more than SHARD_JSON_MAX_DEPTH deep. Strings are skipped with their escapes, arrays
 * and objects by their brackets. */
SHARD_HIDDEN int shard_json_extent(const char *text, size_t len, size_t pos, size_t *end);

#endif /* SHARD_CATALOG_JSONSCAN_H */
