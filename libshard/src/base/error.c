/*
 * Error names and error messages (base/error.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "base/text.h"
#include "base/url.h"

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
    case SHARD_AGAIN: return "nothing yet: call again";
    default: return "unknown error";
    }
}

/* Messages name members, keys and URLs from shards, which may hold terminal escapes:
 * every message leaves the library with its control characters escaped, and its URLs
 * without user, password or query (a signed URL's signature, a token). */
void shard_escape_message(char *buf, size_t size)
{
    char tmp[SHARD_ERROR_MAX];
    shard_url_redact_text(buf);
    for (const char *p = buf; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) {
            shard_text_escape(buf, tmp, sizeof tmp < size ? sizeof tmp : size);
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
