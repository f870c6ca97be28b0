/*
 * Amazon S3 and S3-compatible stores (store.h): requests signed with SigV4 by libcurl
 * (CURLOPT_AWS_SIGV4), credentials as the AWS SDKs find them, ListObjectsV2 for prefixes.
 *
 * SigV4 signs the query exactly as sent, so list queries are built with their parameters
 * sorted and their values percent-encoded; the payload hash is declared UNSIGNED-PAYLOAD.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "base/buf.h"
#include "base/error.h"
#include "remote/objectname.h"
#include "remote/request.h"
#include "remote/retry.h"
#include "remote/s3.h"
#include "remote/xml.h"

struct ShardS3Auth {
    char *key_id, *secret, *token; /* NULL key_id: anonymous */
    char *region;
    char *endpoint;                /* S3-compatible store (path-style), NULL for AWS */
};

static char *env_dup(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? strdup(v) : NULL;
}

/* Finds key in section [section] of an INI file (~/.aws/credentials, ~/.aws/config). */
static char *ini_get(const char *path, const char *section, const char *key)
{
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f)
        return NULL;
    char line[2048], *found = NULL;
    int in = 0;
    while (!found && fgets(line, sizeof line, f)) {
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        p[strcspn(p, "\r\n")] = 0;
        if (*p == '[') {
            char *e = strchr(p, ']');
            if (e)
                *e = 0;
            char *name = p + 1;
            if (!strncmp(name, "profile ", 8))
                name += 8;
            in = !strcmp(name, section);
        } else if (in && !strncmp(p, key, strlen(key))) {
            char *v = p + strlen(key);
            while (*v == ' ' || *v == '\t')
                v++;
            if (*v++ != '=')
                continue;
            while (*v == ' ' || *v == '\t')
                v++;
            size_t n = strlen(v);
            while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
                v[--n] = 0;
            found = strdup(v);
        }
    }
    memset(line, 0, sizeof line);
    fclose(f);
    return found;
}

static char *aws_file(const char *env, const char *name)
{
    const char *v = getenv(env), *home = getenv("HOME");
    if (v && *v)
        return strdup(v);
    if (!home)
        return NULL;
    size_t n = strlen(home) + strlen(name) + 8;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/.aws/%s", home, name);
    return p;
}

void shard_s3_auth_free(ShardS3Auth *a)
{
    if (!a)
        return;
    free(a->key_id);
    shard_secret_free(a->secret);
    shard_secret_free(a->token);
    free(a->region);
    free(a->endpoint);
    free(a);
}

static ShardS3Auth *auth_load(void)
{
    ShardS3Auth *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    const char *profile = getenv("AWS_PROFILE");
    if (!profile || !*profile)
        profile = "default";
    char *creds = aws_file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
    char *config = aws_file("AWS_CONFIG_FILE", "config");
    a->key_id = env_dup("AWS_ACCESS_KEY_ID");
    if (a->key_id) {
        a->secret = env_dup("AWS_SECRET_ACCESS_KEY");
        a->token = env_dup("AWS_SESSION_TOKEN");
    } else if ((a->key_id = ini_get(creds, profile, "aws_access_key_id"))) {
        a->secret = ini_get(creds, profile, "aws_secret_access_key");
        a->token = ini_get(creds, profile, "aws_session_token");
    }
    if (a->key_id && !a->secret) { /* half a credential: anonymous, as the SDKs refuse it */
        free(a->key_id);
        a->key_id = NULL;
    }
    if (!(a->region = env_dup("AWS_REGION")) && !(a->region = env_dup("AWS_DEFAULT_REGION")) &&
        !(a->region = ini_get(config, profile, "region")))
        a->region = strdup("us-east-1");
    if (!(a->endpoint = env_dup("AWS_ENDPOINT_URL_S3")))
        a->endpoint = env_dup("AWS_ENDPOINT_URL");
    if (a->endpoint) {
        size_t n = strlen(a->endpoint);
        while (n && a->endpoint[n - 1] == '/')
            a->endpoint[--n] = 0;
    }
    free(creds);
    free(config);
    if (!a->region) {
        shard_s3_auth_free(a);
        return NULL;
    }
    return a;
}

static ShardS3Auth *auth_get(ShardRemote *r)
{
    pthread_mutex_lock(&r->auth_mu);
    if (!r->s3)
        r->s3 = auth_load();
    ShardS3Auth *a = r->s3;
    pthread_mutex_unlock(&r->auth_mu);
    return a;
}

/* The URL of bucket/key (key encoded, '/' kept) plus query, and the signing. */
static int build(ShardRemote *r, const char *bucket, const char *key, const char *query,
                 ShardRequest *q, char *err)
{
    ShardS3Auth *a = auth_get(r);
    if (!a)
        return shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    ShardBuf u = {0};
    int rc = 0;
    if (a->endpoint) /* path-style; the bucket itself (a listing) takes no trailing '/' */
        rc = shard_buf_printf(&u, "%s/%s%s", a->endpoint, bucket, *key ? "/" : "");
    else
        rc = shard_buf_printf(&u, "https://%s.s3.%s.amazonaws.com/", bucket, a->region);
    if (!rc)
        rc = shard_url_encode(&u, key, 1);
    if (!rc && query)
        rc = shard_buf_printf(&u, "?%s", query);
    q->url = (char *)u.data;
    if (!rc && a->key_id) {
        size_t n = strlen(a->region) + 16;
        if ((q->sigv4 = malloc(n)))
            snprintf(q->sigv4, n, "aws:amz:%s:s3", a->region);
        q->user = strdup(a->key_id);
        q->password = strdup(a->secret);
        rc = !q->sigv4 || !q->user || !q->password;
        if (!rc)
            rc = shard_request_header(q, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
        if (!rc && a->token)
            rc = shard_request_header(q, "x-amz-security-token: %s", a->token);
    }
    return rc ? shard_fail(err, SHARD_ERR_NOMEM, "out of memory") : 0;
}

int shard_s3_request(ShardRemote *r, const ShardObject *o, ShardRequest *q, char *err)
{
    return build(r, o->bucket, o->key, NULL, q, err);
}

int shard_s3_request_query(ShardRemote *r, const ShardObject *o, const char *query,
                           ShardRequest *q, char *err)
{
    return build(r, o->bucket, o->key, query, q, err);
}

/* ---- ListObjectsV2 ------------------------------------------------------------------- */

typedef struct ListPage {
    ShardRemote *r;
    const ShardObject *o;
    const char *token; /* continuation, NULL for the first page */
} ListPage;

static int build_list(void *cookie, ShardRequest *q, char *err)
{
    ListPage *lp = cookie;
    ShardBuf qs = {0};
    int rc = 0;
    if (lp->token) { /* parameters in sorted order, values encoded: SigV4 signs them so */
        rc = shard_buf_printf(&qs, "continuation-token=") || shard_url_encode(&qs, lp->token, 0);
        rc = rc || shard_buf_printf(&qs, "&");
    }
    rc = rc || shard_buf_printf(&qs, "list-type=2&prefix=") ||
         shard_url_encode(&qs, lp->o->key, 0);
    if (rc) {
        shard_buf_free(&qs);
        return shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    }
    rc = build(lp->r, lp->o->bucket, "", (char *)qs.data, q, err);
    shard_buf_free(&qs);
    return rc;
}

int shard_s3_parse_page(const char *body, const ShardObject *prefix, ShardListFn fn,
                        void *cookie, ShardBuf *token, char *err)
{
    ShardBuf key = {0}, size = {0}, url = {0}, trunc = {0};
    int rc = 0;
    token->len = 0;
    const char *p = body, *c;
    while (!rc && (c = strstr(p, "<Contents>"))) {
        const char *end = strstr(c, "</Contents>");
        if (!end)
            break;
        const char *q = c;
        int ok = shard_xml_text(&q, end, "Key", &key);
        q = c;
        int have_size = ok > 0 && shard_xml_text(&q, end, "Size", &size) > 0;
        if (ok < 0)
            rc = shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
        if (ok > 0) {
            url.len = 0;
            if (shard_buf_printf(&url, "s3://%s/%s", prefix->bucket, (char *)key.data))
                rc = shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
            else
                rc = fn(cookie, (char *)url.data,
                        have_size ? strtoull((char *)size.data, NULL, 10) : 0);
        }
        p = end + 11;
    }
    if (!rc) {
        p = body;
        int more = shard_xml_text(&p, NULL, "IsTruncated", &trunc) > 0 &&
                   !strcmp((char *)trunc.data, "true");
        p = body;
        if (!more || shard_xml_text(&p, NULL, "NextContinuationToken", token) <= 0)
            token->len = 0;
    }
    shard_buf_free(&key);
    shard_buf_free(&size);
    shard_buf_free(&url);
    shard_buf_free(&trunc);
    return rc;
}

int shard_s3_list(ShardRemote *r, const ShardObject *prefix, ShardListFn fn, void *cookie,
                  char *err)
{
    ShardBuf body = {0}, token = {0};
    ListPage lp = {r, prefix, NULL};
    int rc = 0;
    for (;;) {
        if ((rc = shard_list_page(r, prefix->url, build_list, &lp, &body, err)))
            break;
        if ((rc = shard_s3_parse_page((const char *)body.data, prefix, fn, cookie, &token, err)) ||
            !token.len)
            break;
        lp.token = (const char *)token.data;
    }
    shard_buf_free(&body);
    shard_buf_free(&token);
    return rc;
}
