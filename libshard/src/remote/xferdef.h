/*
 * A transfer's insides, shared by the code that drives it: the transfer itself (xfer.c),
 * the network thread (net.c) and lanes (lane.c). Nothing else looks inside.
 *
 * DESIGN: a transfer's buffers and flags are guarded by its own mutex (not the ShardRemote's,
 * which every reader and transfer would contend for), shared by its reader and the thread
 * that drives it. On a lane both are the same thread, and the callbacks run inside the
 * reader's calls.
 */
#ifndef SHARD_REMOTE_XFERDEF_H
#define SHARD_REMOTE_XFERDEF_H

#include <pthread.h>
#include <stdatomic.h>

#include <curl/curl.h>

#include "base/attr.h"
#include "remote/request.h"
#include "remote/remotedef.h"
#include "remote/xfertypes.h"

/* libcurl's receive buffer: one read of the socket (its largest, fewer system calls) */
#define XFER_CURL_BUFFER (512 * 1024)
#define BODY_KEEP 768

/* The next transfer of multi handle m (a lane's, or the network thread's) that ended, its
 * result in *cc, taken off m; NULL when none (lane.c). */
SHARD_HIDDEN ShardXfer *shard_multi_finished(CURLM *m, CURLcode *cc);

struct ShardXfer {
    ShardRemote *r;
    ShardNetLane *lane; /* NULL: on r's network thread */
    CURL *easy;
    ShardRequest q;
    pthread_mutex_t mu; /* guards what follows, shared by its reader and the driving thread */
    pthread_cond_t cv;
    unsigned char *buf[2];
    size_t cap[2];
    size_t wlen;   /* bytes in buf[!rside], the one being filled */
    int rside;     /* the buffer the reader holds */
    int paused, want_unpause, cancel, removed, head_done, done;
    int aborted;   /* its reader stopped waiting: shard_remote_abort */
    int fresh;     /* bytes came since the reader was last woken */
    CURLcode result;
    ShardResponse resp;
    char body[BODY_KEEP];
    size_t nbody;
    char errbuf[CURL_ERROR_SIZE];
    ShardXfer *next;
};

#endif /* SHARD_REMOTE_XFERDEF_H */
