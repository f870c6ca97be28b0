/*
 * Error names, error messages, and the small utilities every module uses.
 */
#include <errno.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "shard/names.h"
#include "shard/version.h"

const char *shard_strerror(int code)
{
    switch (code) {
    case SHARD_OK: return "success";
    case SHARD_ERR_INVALID: return "invalid argument";
    case SHARD_ERR_NOMEM: return "out of memory";
    case SHARD_ERR_IO: return "I/O error";
    case SHARD_ERR_NOSPACE: return "no space left on device";
    case SHARD_ERR_FORMAT: return "malformed input";
    case SHARD_ERR_NOT_FOUND: return "not found";
    case SHARD_ERR_CHECKSUM: return "checksum mismatch";
    case SHARD_ERR_DECODE: return "image does not decode";
    case SHARD_ERR_UNSUPPORTED: return "unsupported";
    case SHARD_ERR_NOCUDA: return "CUDA not available";
    case SHARD_ERR_STATE: return "call out of order or on a failed handle";
    case SHARD_EOS: return "end of stream";
    default: return "unknown error";
    }
}

const char *shard_version(void)
{
    return SHARD_VERSION_STRING;
}

/* Messages name members, keys and URLs from shards, which may hold terminal escapes:
 * every message leaves the library with its control characters escaped. */
void shard_escape_message(char *buf, size_t size)
{
    char tmp[SHARD_ERROR_MAX];
    for (const char *p = buf; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) {
            shard_escape(buf, tmp, sizeof tmp < size ? sizeof tmp : size);
            memcpy(buf, tmp, strlen(tmp) + 1);
            return;
        }
}

int shard_fail(char *buf, int code, const char *fmt, ...)
{
    if (buf) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, SHARD_ERROR_MAX, fmt, ap);
        va_end(ap);
        shard_escape_message(buf, SHARD_ERROR_MAX);
    }
    return code;
}

int shard_report(ShardError *err, int code, const char *msg)
{
    if (err) {
        err->code = code;
        snprintf(err->message, sizeof err->message, "%s", msg ? msg : shard_strerror(code));
        shard_escape_message(err->message, sizeof err->message);
    }
    return code;
}

int shard_errno_code(int e)
{
    switch (e) {
    case ENOSPC:
    case EDQUOT:
    case EFBIG: return SHARD_ERR_NOSPACE;
    case ENOENT: return SHARD_ERR_NOT_FOUND;
    case ENOMEM: return SHARD_ERR_NOMEM;
    default: return SHARD_ERR_IO;
    }
}

int shard_buf_reserve(ShardBuf *b, size_t extra)
{
    if (b->cap - b->len >= extra)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < extra) {
        if (cap > SIZE_MAX / 2)
            return SHARD_ERR_NOMEM;
        cap *= 2;
    }
    unsigned char *p = realloc(b->data, cap);
    if (!p)
        return SHARD_ERR_NOMEM;
    b->data = p;
    b->cap = cap;
    return 0;
}

int shard_buf_append(ShardBuf *b, const void *p, size_t n)
{
    int rc = shard_buf_reserve(b, n);
    if (rc)
        return rc;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

int shard_buf_printf(ShardBuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return SHARD_ERR_INVALID;
    int rc = shard_buf_reserve(b, (size_t)n + 1);
    if (rc)
        return rc;
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void shard_buf_free(ShardBuf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

int shard_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

char *shard_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

int shard_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

char *shard_dir_of(const char *path)
{
    char *tmp = shard_strdup(path);
    if (!tmp)
        return NULL;
    char *d = shard_strdup(dirname(tmp));
    free(tmp);
    return d;
}
