/*
 * URLs (url.h): what a URL names, decided here and nowhere else. A new kind of storage is
 * one more case here, one more source (source/open.c) and, if it takes writes, one more
 * sink (sink/sink.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/text.h"
#include "base/url.h"
#include "shard/common.h"

int shard_url_is_command(const char *url) { return !strncmp(url, "pipe:", 5); }

int shard_url_is_remote(const char *url)
{
    return !strncmp(url, "http://", 7) || !strncmp(url, "https://", 8) ||
           !strncmp(url, "gs://", 5) || !strncmp(url, "s3://", 5) || !strncmp(url, "hf://", 5);
}

int shard_url_has_scheme(const char *url)
{
    const char *p = strstr(url, "://");
    return p && p > url;
}

const char *shard_url_file_path(const char *url)
{
    if (strncmp(url, "file://", 7))
        return NULL;
    const char *p = url + 7;
    if (!strncmp(p, "localhost/", 10))
        p += 9;
    return *p == '/' ? p : NULL;
}

int shard_url_has_siblings(const char *url)
{
    return !shard_url_is_command(url) &&
           (!shard_url_has_scheme(url) || shard_url_is_remote(url) || shard_url_file_path(url));
}

int shard_url_costly(const char *url) { return shard_url_is_remote(url); }

int shard_url_is_prefix(const char *url)
{
    size_t n = strlen(url);
    return shard_url_is_remote(url) && n && url[n - 1] == '/';
}

int shard_url_is_absolute(const char *url)
{
    return url[0] == '/' || shard_url_has_scheme(url) || shard_url_is_command(url);
}

char *shard_url_resolve(const char *base, const char *url)
{
    if (shard_url_is_absolute(url))
        return strdup(url);
    char *dir = shard_dir_of(base);
    if (!dir || !strcmp(dir, ".")) {
        free(dir);
        return dir ? strdup(url) : NULL;
    }
    size_t n = strlen(dir) + strlen(url) + 2;
    char *full = malloc(n);
    if (full)
        snprintf(full, n, "%s/%s", dir, url);
    free(dir);
    return full;
}

void shard_url_shown(const char *url, char *out, size_t cap)
{
    const char *at = url, *scheme = strstr(url, "://");
    size_t n = 0;
    if (scheme) {
        const char *host = scheme + 3, *end = host + strcspn(host, "/?#");
        const char *user = memchr(host, '@', (size_t)(end - host));
        n = (size_t)(host - url);
        n = n < cap ? n : cap - 1;
        memcpy(out, url, n);
        at = user ? user + 1 : host;
    }
    size_t k = strcspn(at, "?#");
    if (n + k >= cap)
        k = cap - 1 - n;
    memcpy(out + n, at, k);
    out[n + k] = 0;
}

/* What ends a URL inside a message: a space, a quote, an angle bracket. */
static int ends_url(char c)
{
    return !c || c == ' ' || c == '\t' || c == '\n' || c == '"' || c == '\'' || c == '<' ||
           c == '>' || c == '`';
}

/* Punctuation after a URL that belongs to the sentence (": offset 7", "url, ..."). */
static int trailing(char c) { return c == ':' || c == ',' || c == ';' || c == '.' || c == ')'; }

void shard_url_redact_text(char *text)
{
    char *p = text;
    while ((p = strstr(p, "://"))) {
        char *host = p + 3, *end = host;
        while (!ends_url(*end))
            end++;
        char *auth = host + strcspn(host, "/?#");
        if (auth > end)
            auth = end;
        char *user = NULL;
        for (char *q = host; q < auth; q++)
            if (*q == '@')
                user = q;
        if (user) { /* user:password@ out */
            memmove(host, user + 1, strlen(user + 1) + 1);
            end -= user + 1 - host;
            auth -= user + 1 - host;
        }
        char *query = auth + strcspn(auth, "?");
        char *stop = end;
        while (stop > query + 1 && trailing(stop[-1]))
            stop--;
        if (query < end && !strncmp(query, "?...", 4) && query + 4 >= stop)
            query = end; /* redacted already */
        if (query < end) { /* the query out, a mark of it left; the sentence's punctuation kept */
            size_t mark = stop - query >= 4 ? 4 : 0;
            memcpy(query, "?...", mark);
            memmove(query + mark, stop, strlen(stop) + 1);
            end = query + mark + (end - stop);
        }
        p = end;
    }
}

void shard_url_display(const char *url, char *out, size_t cap)
{
    if (!cap)
        return;
    char *copy = strdup(url); /* redacted whole, then cut: a cut must not keep a password */
    if (!copy) {
        snprintf(out, cap, "%s", "(a URL)");
        return;
    }
    shard_url_redact_text(copy);
    snprintf(out, cap, "%s", copy);
    free(copy);
}

/* Whether the query parameter name (n bytes) signs or authorizes a request. */
static int signing(const char *name, size_t n)
{
    static const char *const prefixes[] = {"x-amz-", "x-goog-"};
    static const char *const names[] = {
        "signature", "expires", "googleaccessid", "key-pair-id", "policy", "awsaccesskeyid",
        "token", "access_token", "sig", "se", "st", "sp", "sv", "sr", "ss", "srt", "spr",
        "sip", "skoid", "sktid", "skt", "ske", "sks", "skv", "sdd", "sduoid", "saoid", "suoid",
        "scid"};
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
        if (n >= strlen(prefixes[i]) && !strncasecmp(name, prefixes[i], strlen(prefixes[i])))
            return 1;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (n == strlen(names[i]) && !strncasecmp(name, names[i], n))
            return 1;
    return 0;
}

char *shard_url_unsigned(const char *url)
{
    size_t len = strlen(url);
    char *out = malloc(len + 1);
    if (!out)
        return NULL;
    const char *scheme = strstr(url, "://"), *at = url;
    size_t o = 0;
    if (scheme) { /* the scheme, then the host without a user:password@ */
        const char *host = scheme + 3, *end = host + strcspn(host, "/?#");
        const char *user = NULL;
        for (const char *q = host; q < end; q++)
            if (*q == '@')
                user = q;
        memcpy(out, url, (size_t)(host - url));
        o = (size_t)(host - url);
        at = user ? user + 1 : host;
    }
    size_t k = strcspn(at, "?#");
    memcpy(out + o, at, k);
    o += k;
    at += k;
    if (*at == '?') {
        at++;
        char sep = '?';
        while (*at && *at != '#') {
            size_t n = strcspn(at, "&#"), name = strcspn(at, "=&#");
            if (n && !signing(at, name < n ? name : n)) {
                out[o++] = sep;
                memcpy(out + o, at, n);
                o += n;
                sep = '&';
            }
            at += n + (at[n] == '&');
        }
    }
    out[o] = 0; /* a fragment never reaches a server: dropped */
    return out;
}
