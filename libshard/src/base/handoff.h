/*
 * Copies whose destination another thread reads next.
 */
#ifndef SHARD_BASE_HANDOFF_H
#define SHARD_BASE_HANDOFF_H

#include <stddef.h>

#include "base/attr.h"

/* memcpy for bytes another thread reads next: streaming stores where the CPU has them, so
 * that the lines do not travel from the writer's cache to the reader's. */
SHARD_HIDDEN void shard_copy_handoff(void *dst, const void *src, size_t n);

#endif /* SHARD_BASE_HANDOFF_H */
