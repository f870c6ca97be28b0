/*
 * Text: copies, suffixes and folders of paths, ASCII case, UTF-8, and escaping what came
 * from a shard before it reaches a terminal.
 */
#ifndef SHARD_BASE_TEXT_H
#define SHARD_BASE_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"

/* A decimal number at *s into *v, moving *s past it: 0, or -1 (*s as it was) when there is
 * none or it does not fit in 64 bits. The one parser of the state's numbers. */
SHARD_HIDDEN int shard_text_u64(const char **s, uint64_t *v);

/* Whether s ends with suffix. */
SHARD_HIDDEN int shard_ends_with(const char *s, const char *suffix);

/* The last component of a path (after its last '/'), a pointer into path. */
SHARD_HIDDEN const char *shard_base_name(const char *path);

/* The folder part of a path (dirname), malloc'd; NULL when out of memory. */
SHARD_HIDDEN char *shard_dir_of(const char *path);

/* strcasecmp for ASCII letters only, whatever the locale (Python sets LC_CTYPE from the
 * environment, and strcasecmp would then fold other bytes too): as formats/shard.md 2.2
 * compares field names. */
static inline int shard_ascii_casecmp(const char *a, const char *b)
{
    for (;; a++, b++) {
        int x = (unsigned char)*a, y = (unsigned char)*b;
        x += (x >= 'A' && x <= 'Z') ? 'a' - 'A' : 0;
        y += (y >= 'A' && y <= 'Z') ? 'a' - 'A' : 0;
        if (x != y || !x)
            return x - y;
    }
}

/* Whether the size bytes at s are valid UTF-8 (no overlongs, no surrogates). */
SHARD_HIDDEN int shard_text_utf8_valid(const char *s, size_t size);

/* in with control characters (C0, DEL, C1) and bytes that are not UTF-8 as \xNN (tab and
 * newline as \t, \n), cut at a whole character to fit outsize bytes (out NULL: measured
 * only); returns the whole escaped text's length, as snprintf does. */
SHARD_HIDDEN size_t shard_text_escape(const char *in, char *out, size_t outsize);

#endif /* SHARD_BASE_TEXT_H */
