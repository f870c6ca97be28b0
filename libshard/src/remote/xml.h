/*
 * The text of XML elements in a store's reply (xml.c): S3's listings, errors and multipart
 * upload answers are small documents read by tag, not parsed whole.
 */
#ifndef SHARD_REMOTE_XML_H
#define SHARD_REMOTE_XML_H

#include "base/attr.h"
#include "base/buf.h"

/* The text of the first <tag>...</tag> at or after *p and before end (NULL: the text's
 * end), XML entities decoded, into out (NUL-terminated, its length out->len); advances *p
 * past it. 1 when found, 0 when there is none, SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_xml_text(const char **p, const char *end, const char *tag, ShardBuf *out);

/* Whether the document at body holds a <tag> element. */
SHARD_HIDDEN int shard_xml_has(const char *body, const char *tag);

#endif /* SHARD_REMOTE_XML_H */
