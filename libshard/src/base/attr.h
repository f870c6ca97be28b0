/*
 * Attributes of the library's private declarations.
 */
#ifndef SHARD_BASE_ATTR_H
#define SHARD_BASE_ATTR_H

/* Not exported (the build hides everything by default; this says so where it is declared). */
#define SHARD_HIDDEN __attribute__((visibility("hidden")))
/* A printf-style function: format argument f, arguments from a. */
#define SHARD_PRINTF(f, a) __attribute__((format(printf, f, a)))

#endif /* SHARD_BASE_ATTR_H */
