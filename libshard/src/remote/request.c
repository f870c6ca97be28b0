/*
 * HTTP requests as the stores build them (request.h).
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "base/buf.h"
#include "remote/request.h"
#include "shard/common.h"

void shard_secret_free(char *s)
{
    if (s) {
        memset(s, 0, strlen(s));
        free(s);
    }
}

void shard_request_clear(ShardRequest *q)
{
    free(q->url);
    curl_slist_free_all(q->headers);
    free(q->sigv4);
    free(q->user);
    shard_secret_free(q->password);
    free(q->post);
    free(q->if_range);
    memset(q, 0, sizeof *q);
}

int shard_request_header(ShardRequest *q, const char *fmt, ...)
{
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof line)
        return SHARD_ERR_INVALID;
    struct curl_slist *h = curl_slist_append(q->headers, line);
    memset(line, 0, sizeof line); /* it may be a credential */
    if (!h)
        return SHARD_ERR_NOMEM;
    q->headers = h;
    return 0;
}

int shard_url_encode(ShardBuf *out, const char *s, int keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        int plain = isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~' ||
                    (keep_slash && *p == '/');
        char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
        if (plain ? shard_buf_append(out, p, 1) : shard_buf_append(out, e, 3))
            return SHARD_ERR_NOMEM;
    }
    return shard_buf_reserve(out, 1) ? SHARD_ERR_NOMEM : (out->data[out->len] = 0, 0);
}
