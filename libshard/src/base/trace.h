/*
 * Traces (trace.c): spans of the pipeline's stages recorded from every thread into a buffer
 * of bounded size, written in the Chrome trace event format, which Perfetto and
 * chrome://tracing open, beside a torch.profiler trace of the same run.
 */
#ifndef SHARD_BASE_TRACE_H
#define SHARD_BASE_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "base/buf.h"


typedef struct ShardTrace ShardTrace;

/* A trace keeping at most max_events spans (later ones are counted, not kept); NULL when
 * out of memory. */
SHARD_HIDDEN ShardTrace *shard_trace_new(size_t max_events);
/* Timestamps count from origin (shard_seconds) rather than the trace's making: for a span
 * that began before it. Before any span is recorded. */
SHARD_HIDDEN void shard_trace_set_origin(ShardTrace *t, double origin);
/* A span of the calling thread: name (static), from start to end (shard_seconds), with
 * items (samples, or 0) as its argument. Thread-safe. */
SHARD_HIDDEN void shard_trace_span(ShardTrace *t, const char *name, double start, double end,
                                   uint64_t items);
/* Appends the spans so far to out as Chrome trace JSON (the caller writes it where it is
 * wanted, through a sink); 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_trace_render(ShardTrace *t, ShardBuf *out);
SHARD_HIDDEN void shard_trace_free(ShardTrace **t);

#endif /* SHARD_BASE_TRACE_H */
