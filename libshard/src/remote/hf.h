/*
 * The Hugging Face Hub's conventions (hf.c): hf://datasets/OWNER/NAME[@REVISION]/PATH read
 * through the Hub's resolve URLs (its redirect to the CDN followed, Range and If-Range as for
 * any HTTP object), listed through its tree API (pages joined by Link headers) with the
 * revision resolved to its commit first and pinned in every URL listed; the endpoint from
 * HF_ENDPOINT (a mirror, a stand-in), the token from HF_TOKEN or the Hub's token file, sent
 * as a bearer to the Hub and never shown. The Hub is read only: its store row writes nothing.
 */
#ifndef SHARD_REMOTE_HF_H
#define SHARD_REMOTE_HF_H

#include <stdint.h>

#include "base/attr.h"
#include "remote/objectname.h"
#include "remote/remotedef.h"
#include "remote/request.h"
#include "remote/storedef.h"

/* Parses url (hf://...) into o: bucket "OWNER/NAME", rev (NULL: "main"), key the path.
 * @return 0, or SHARD_ERR_INVALID saying what an hf:// URL looks like */
SHARD_HIDDEN int shard_hf_parse(ShardObject *o, const char *url, char *err);
/* The request reading o through its resolve URL (counted: ShardRemoteStats.resolves). */
SHARD_HIDDEN int shard_hf_request(ShardRemote *r, const ShardObject *o, ShardRequest *q,
                                  char *err);
/* Until when (seconds since 1970) a link the resolve URL redirected to may be asked again
 * straight: the expiry its signature states (CloudFront's Expires=, SigV4's X-Amz-Date plus
 * X-Amz-Expires, the earlier of the two), INT64_MAX when it states none. */
SHARD_HIDDEN int64_t shard_hf_link_until(const char *url);
/* Every file under prefix (hf://datasets/OWNER/NAME[@REV]/DIR/), in name order, each as
 * hf://datasets/OWNER/NAME@COMMIT/PATH: the revision resolved once, then the tree's pages. */
SHARD_HIDDEN int shard_hf_list(ShardRemote *r, const ShardObject *prefix, ShardListFn fn,
                               void *cookie, char *err);
/* One page of a tree listing (JSON, NUL-terminated): each file whose path starts with
 * under, to fn(cookie, path, size) (path borrowed). */
SHARD_HIDDEN int shard_hf_parse_tree(const char *body, const char *shown, const char *under,
                                     ShardListFn fn, void *cookie, char *err);
/* The token (HF_TOKEN, else $HF_TOKEN_PATH, $HF_HOME/token or ~/.cache/huggingface/token),
 * read once per handle; NULL when none. */
SHARD_HIDDEN const char *shard_hf_token(ShardRemote *r);

/* The store row of hf:// (store.c's switch). */
extern const ShardStoreRow shard_store_hub;

#endif /* SHARD_REMOTE_HF_H */
