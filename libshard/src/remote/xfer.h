/*
 * Transfers: one HTTP request each (xfer.c), its body handed to its reader through two
 * buffers: the thread driving the transfer fills one while the reader consumes the other,
 * and a full buffer pauses the transfer (memory stays bounded by the buffer setting,
 * whatever the object's size).
 *
 * Two kinds of thread drive transfers. A ShardRemote's network thread (net.c) carries every
 * transfer started without a lane: connections are reused and objects download side by
 * side. A lane (lane.c) is a multi handle of its own, driven by the one thread that reads
 * its transfers, inside their reads: a fetch stream's shards, the one it reads and the one
 * opened ahead. The bytes then come off the socket on the core that parses them, instead of
 * being handed from the network thread's core to the reader's (on a loaded machine that
 * handoff, not the network, was what bounded a remote read).
 *
 * Retries, resumes and object versions are the caller's business (source/remotesource.c,
 * retry.h); a transfer is one attempt.
 */
#ifndef SHARD_REMOTE_XFER_H
#define SHARD_REMOTE_XFER_H

#include <stdint.h>
#include <sys/types.h>

#include "base/attr.h"
#include "remote/request.h"
#include "remote/xfertypes.h"
#include "shard/remote.h"


/* Starts request q (moved into the transfer: q is left cleared) on r's network thread.
 * Every transfer must end with shard_xfer_free. */
SHARD_HIDDEN int shard_xfer_start(ShardRemote *r, ShardRequest *q, ShardXfer **out, char *err);
/* shard_xfer_start on lane (NULL: r's network thread); r still gives the settings and
 * counts the bytes. The request goes out before this returns. */
SHARD_HIDDEN int shard_xfer_start_on(ShardRemote *r, ShardNetLane *lane, ShardRequest *q,
                                     ShardXfer **out, char *err);

/* Waits for the response's headers (or the end of the transfer): the response, or NULL when
 * the transfer ended without one (shard_xfer_error says why). */
SHARD_HIDDEN const ShardResponse *shard_xfer_head(ShardXfer *x);

/* The next bytes of the body: n > 0 with *block valid until the next call; 0 when the body
 * ended cleanly; -1 when the transfer failed (shard_xfer_error). Only for 2xx responses:
 * other bodies are kept for messages (shard_xfer_body). */
SHARD_HIDDEN ssize_t shard_xfer_read(ShardXfer *x, const void **block);

/* After a failure: its kind and libcurl's words ("" and SHARD_NET_OK when the transfer
 * completed). */
SHARD_HIDDEN ShardNetFail shard_xfer_error(ShardXfer *x, const char **why);

/* The URL the transfer asked (before any redirect). */
SHARD_HIDDEN const char *shard_xfer_url(ShardXfer *x);

/* The start of a non-2xx body (an S3 or GCS error document), NUL-terminated. */
SHARD_HIDDEN const char *shard_xfer_body(ShardXfer *x);

/* Stops the transfer if it still runs and frees it. Accepts NULL. */
SHARD_HIDDEN void shard_xfer_free(ShardXfer **x);

/* Sets up the transfer buffers kept for reuse, when the ShardRemote is made: 0 or
 * SHARD_ERR_NOMEM. Frees them when it goes. */
SHARD_HIDDEN int shard_xfer_buffers_init(ShardRemote *r);
SHARD_HIDDEN void shard_xfer_buffers_free(ShardRemote *r);

#endif /* SHARD_REMOTE_XFER_H */
