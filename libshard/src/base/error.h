/*
 * Errors inside the library: a failure is a negative code (shard/common.h) and a message
 * that says what and where, written into the caller's buffer of SHARD_ERROR_MAX bytes.
 */
#ifndef SHARD_BASE_ERROR_H
#define SHARD_BASE_ERROR_H

#include <stddef.h>

#include "base/attr.h"
#include "shard/common.h"

/* Formats a message into buf (SHARD_ERROR_MAX bytes; NULL: none wanted) and returns code,
 * so a failure reads `return shard_fail(w->err, SHARD_ERR_IO, "...", ...);`. */
SHARD_HIDDEN int shard_fail(char *buf, int code, const char *fmt, ...) SHARD_PRINTF(3, 4);

/* Escapes a message's control characters and takes its URLs' credentials out, in place
 * (base/text.h, base/url.h), as shard_fail and shard_report do: names from shards may hold
 * terminal escape sequences, URLs passwords and signatures. */
SHARD_HIDDEN void shard_escape_message(char *buf, size_t size);

/* Copies a message (NULL: the code's name) into an optional ShardError and returns code. */
SHARD_HIDDEN int shard_report(ShardError *err, int code, const char *msg);

/* The return code for an errno value: full disk and quota become SHARD_ERR_NOSPACE,
 * a missing file SHARD_ERR_NOT_FOUND, the rest SHARD_ERR_IO. */
SHARD_HIDDEN int shard_errno_code(int e);

#endif /* SHARD_BASE_ERROR_H */
