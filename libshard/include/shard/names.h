/*
 * libshard — member names, sample keys and fields (formats/shard.md).
 *
 * WebDataset's rule: a member "dir/name.ext1.ext2" belongs to the sample with key
 * "dir/name" and is its field "ext1.ext2": the key ends at the first dot of the basename.
 * All functions here are pure and thread-safe.
 */
#ifndef SHARD_NAMES_H
#define SHARD_NAMES_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Splits a member path by WebDataset's rule. A leading "./" is not part of the key.
 * @param member NUL-terminated member path; borrowed
 * @param key_start receives the offset of the key in member (after any "./")
 * @param key_len receives the key's length in bytes
 * @param field receives a pointer into member at the field (after the dot)
 * @return 0; SHARD_ERR_NOT_FOUND when the member is not a sample field as WebDataset
 *         skips it: its basename has no dot, starts with a dot, or starts with "__"
 */
SHARD_API int shard_name_split(const char *member, size_t *key_start, size_t *key_len,
                               const char **field);

/**
 * Checks that a key can be written: non-empty UTF-8, no empty, "." or ".." path component,
 * no leading '/', no '.' in the basename, no whitespace (which would break index lines) and
 * no control characters anywhere, and a basename not starting with "__".
 * @return 0, or SHARD_ERR_INVALID
 */
SHARD_API int shard_key_check(const char *key);

/**
 * Derives a key from a relative file path as shardpack does: drops the last extension,
 * then replaces every '.' and whitespace character of every component with '_'.
 * "n01/img.v2 final.JPEG" gives "n01/img_v2_final".
 * @param path relative path; borrowed
 * @param out buffer of outsize bytes for the NUL-terminated key; caller-owned
 * @return the key's length, SHARD_ERR_FORMAT if path is not valid UTF-8 or has an empty
 *         or "."/".." component, SHARD_ERR_INVALID if out is too small
 */
SHARD_API int shard_key_from_path(const char *path, char *out, size_t outsize);

/**
 * Copies text from a shard (a name, a key, a message naming them) for a terminal or a log:
 * control characters (C0, DEL and C1, which include terminal escape sequences' starts) and
 * bytes that are not UTF-8 become \xNN (tab and newline \t, \n); the rest is kept.
 * @param in NUL-terminated; borrowed
 * @param out receives the escaped text, cut at a whole character to fit outsize bytes and
 *        NUL-terminated; caller-owned; NULL to measure
 * @return the length of the whole escaped text (as snprintf)
 */
SHARD_API size_t shard_escape(const char *in, char *out, size_t outsize);

/**
 * Whether two field names name the same field for a reader with that lowercase setting:
 * equal after lower-casing ASCII A-Z (lowercase on), or byte for byte (off). Independent of
 * the locale, unlike strcasecmp.
 */
SHARD_API int shard_field_equal(const char *a, const char *b, int lowercase);

/** @return 1 if the size bytes at s are valid UTF-8 (no overlongs, no surrogates), else 0 */
SHARD_API int shard_utf8_valid(const char *s, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* SHARD_NAMES_H */
