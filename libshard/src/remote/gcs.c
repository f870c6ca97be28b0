/*
 * Google Cloud Storage (store.h): the JSON API (media downloads with Range, pinned to a
 * generation; listings by prefix, page by page) and OAuth2 access tokens found as Google's
 * client libraries find them:
 *   STORAGE_EMULATOR_HOST   an emulator: its URL (scheme optional), no credentials sent
 *   settings / GOOGLE_OAUTH_ACCESS_TOKEN   a token given as is
 *   GOOGLE_APPLICATION_CREDENTIALS   a service-account key: a JWT signed RS256 (OpenSSL)
 *                           exchanged at the key's token_uri
 *   the metadata server     GCE_METADATA_HOST or metadata.google.internal
 *   anonymous               public buckets
 * Tokens are shared by the threads of a ShardRemote and refreshed before they expire.
 * SHARD_GCS_ENDPOINT sends requests (with credentials) to another endpoint than Google's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "base/buf.h"
#include "base/error.h"
#include "remote/gcs.h"
#include "remote/objectname.h"
#include "remote/request.h"
#include "remote/retry.h"

#define GCS_SCOPE "https://www.googleapis.com/auth/devstorage.read_only"

typedef enum { AUTH_NONE, AUTH_STATIC, AUTH_KEY, AUTH_METADATA } AuthMode;

struct ShardGcsAuth {
    char *endpoint;  /* https://storage.googleapis.com, or the emulator's */
    AuthMode mode;
    char *token;     /* the current access token, NULL before the first */
    double expires;  /* when it expires (CLOCK_REALTIME seconds), 0 for never */
    char *email, *private_key, *token_uri; /* AUTH_KEY */
    char *metadata;  /* AUTH_METADATA: the server's base URL */
    int metadata_failed;
};

static double wall_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

void shard_gcs_auth_free(ShardGcsAuth *a)
{
    if (!a)
        return;
    free(a->endpoint);
    shard_secret_free(a->token);
    free(a->email);
    shard_secret_free(a->private_key);
    free(a->token_uri);
    free(a->metadata);
    free(a);
}

/* A base URL from a host or URL: "http://" added when it has no scheme, trailing "/" and
 * "/storage/v1" taken off. */
static char *base_url(const char *v)
{
    ShardBuf b = {0};
    if (!strstr(v, "://") && shard_buf_printf(&b, "http://"))
        return NULL;
    if (shard_buf_printf(&b, "%s", v))
        return NULL;
    char *s = (char *)b.data;
    size_t n = b.len;
    while (n && s[n - 1] == '/')
        s[--n] = 0;
    if (n >= 11 && !strcmp(s + n - 11, "/storage/v1"))
        s[n - 11] = 0;
    return s;
}

static int auth_load(ShardRemote *r, ShardGcsAuth *a, char *err)
{
    const char *emu = getenv("STORAGE_EMULATOR_HOST");
    const char *custom = getenv("SHARD_GCS_ENDPOINT");
    a->endpoint = base_url(emu && *emu ? emu
                           : custom && *custom ? custom
                                               : "https://storage.googleapis.com");
    if (!a->endpoint)
        return shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    if (emu && *emu) {
        a->mode = AUTH_NONE;
        return 0;
    }
    const char *tok = r->s.gcs_token ? r->s.gcs_token : getenv("GOOGLE_OAUTH_ACCESS_TOKEN");
    if (tok && *tok) {
        a->mode = AUTH_STATIC;
        a->token = strdup(tok);
        return a->token ? 0 : shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    }
    const char *keyfile = getenv("GOOGLE_APPLICATION_CREDENTIALS");
    if (keyfile && *keyfile) {
        json_error_t je;
        json_t *k = json_load_file(keyfile, 0, &je);
        if (!k)
            return shard_fail(err, SHARD_ERR_FORMAT,
                              "GOOGLE_APPLICATION_CREDENTIALS=%s: not a JSON key file: %s (line "
                              "%d)",
                              keyfile, je.text, je.line);
        const char *type = json_string_value(json_object_get(k, "type"));
        const char *email = json_string_value(json_object_get(k, "client_email"));
        const char *pk = json_string_value(json_object_get(k, "private_key"));
        const char *uri = json_string_value(json_object_get(k, "token_uri"));
        int rc = 0;
        if (!type || strcmp(type, "service_account") || !email || !pk)
            rc = shard_fail(err, SHARD_ERR_UNSUPPORTED,
                            "GOOGLE_APPLICATION_CREDENTIALS=%s: not a service-account key "
                            "(type, client_email and private_key are needed)",
                            keyfile);
        else {
            a->mode = AUTH_KEY;
            a->email = strdup(email);
            a->private_key = strdup(pk);
            a->token_uri = strdup(uri ? uri : "https://oauth2.googleapis.com/token");
            if (!a->email || !a->private_key || !a->token_uri)
                rc = shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
        }
        json_decref(k);
        return rc;
    }
    const char *md = getenv("GCE_METADATA_HOST");
    a->mode = AUTH_METADATA;
    a->metadata = base_url(md && *md ? md : "metadata.google.internal");
    return a->metadata ? 0 : shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
}

/* base64url without padding, appended. */
static int b64url(ShardBuf *out, const void *p, size_t n)
{
    if (shard_buf_reserve(out, 4 * ((n + 2) / 3) + 1))
        return SHARD_ERR_NOMEM;
    char *o = (char *)out->data + out->len;
    int k = EVP_EncodeBlock((unsigned char *)o, p, (int)n);
    for (int i = 0; i < k; i++)
        o[i] = o[i] == '+' ? '-' : o[i] == '/' ? '_' : o[i];
    while (k && o[k - 1] == '=')
        k--;
    out->len += (size_t)k;
    return 0;
}

/* The signed assertion for the key: header.claims.signature. */
static int make_jwt(const ShardGcsAuth *a, ShardBuf *jwt, char *err)
{
    char claims[2048];
    long now = (long)wall_now();
    json_t *c = json_pack("{s:s, s:s, s:s, s:I, s:I}", "iss", a->email, "scope", GCS_SCOPE, "aud",
                          a->token_uri, "iat", (json_int_t)now, "exp", (json_int_t)now + 3600);
    char *cs = c ? json_dumps(c, JSON_COMPACT) : NULL;
    json_decref(c);
    if (!cs)
        return shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    snprintf(claims, sizeof claims, "%s", cs);
    free(cs);
    static const char head[] = "{\"alg\":\"RS256\",\"typ\":\"JWT\"}";
    int rc = b64url(jwt, head, strlen(head)) || shard_buf_append(jwt, ".", 1) ||
             b64url(jwt, claims, strlen(claims));
    if (rc)
        return shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    BIO *bio = BIO_new_mem_buf(a->private_key, -1);
    EVP_PKEY *key = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
    BIO_free(bio);
    if (!key)
        return shard_fail(err, SHARD_ERR_FORMAT,
                          "GOOGLE_APPLICATION_CREDENTIALS: the private_key of %s does not parse",
                          a->email);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char sig[1024];
    size_t nsig = sizeof sig;
    int ok = md && EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) == 1 &&
             EVP_DigestSign(md, sig, &nsig, jwt->data, jwt->len) == 1;
    EVP_MD_CTX_free(md);
    EVP_PKEY_free(key);
    if (!ok)
        return shard_fail(err, SHARD_ERR_FORMAT, "signing the token request of %s failed",
                          a->email);
    if (shard_buf_append(jwt, ".", 1) || b64url(jwt, sig, nsig) || shard_buf_reserve(jwt, 1))
        return shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    jwt->data[jwt->len] = 0;
    return 0;
}

typedef struct TokenReq {
    const ShardGcsAuth *a;
    const char *jwt;
} TokenReq;

static int build_token(void *cookie, ShardRequest *q, char *err)
{
    TokenReq *t = cookie;
    ShardBuf u = {0};
    int rc;
    if (t->a->mode == AUTH_KEY) {
        q->url = strdup(t->a->token_uri);
        ShardBuf body = {0};
        rc = !q->url ||
             shard_buf_printf(&body, "grant_type=urn%%3Aietf%%3Aparams%%3Aoauth%%3Agrant-type%%"
                                     "3Ajwt-bearer&assertion=%s",
                              t->jwt);
        q->post = (char *)body.data;
    } else {
        rc = shard_buf_printf(&u, "%s/computeMetadata/v1/instance/service-accounts/default/token",
                              t->a->metadata);
        q->url = (char *)u.data;
        rc = rc || shard_request_header(q, "Metadata-Flavor: Google");
    }
    return rc ? shard_fail(err, SHARD_ERR_NOMEM, "out of memory") : 0;
}

/* A fresh token into a->token (under r->auth_mu). */
int shard_gcs_parse_token(const char *body, const char *where, char **token, double *life,
                          char *err)
{
    *token = NULL;
    json_t *j = json_loads(body, 0, NULL);
    if (!j)
        return shard_fail(err, SHARD_ERR_FORMAT, "getting a Google access token from %s: the "
                          "reply is not JSON", where);
    const char *tok = json_string_value(json_object_get(j, "access_token"));
    json_int_t secs = json_integer_value(json_object_get(j, "expires_in"));
    int rc = 0;
    if (!tok)
        rc = shard_fail(err, SHARD_ERR_FORMAT, "getting a Google access token from %s: the "
                        "reply has no access_token", where);
    else if (!(*token = strdup(tok)))
        rc = shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    *life = secs > 0 ? (double)secs : 3600;
    json_decref(j);
    return rc;
}

static int refresh(ShardRemote *r, ShardGcsAuth *a, char *err)
{
    ShardBuf jwt = {0}, body = {0};
    TokenReq t = {a, NULL};
    int rc = 0;
    const char *where = a->mode == AUTH_KEY ? a->token_uri : a->metadata;
    if (a->mode == AUTH_KEY && !(rc = make_jwt(a, &jwt, err)))
        t.jwt = (const char *)jwt.data;
    long status = 0;
    /* off GCE nothing answers the metadata server: find out quickly */
    int retries = a->mode == AUTH_METADATA && r->s.retries > 2 ? 2 : r->s.retries;
    if (!rc)
        rc = shard_request_whole(r, where, build_token, &t, &body, 1u << 20, retries, &status, NULL, err);
    if (jwt.data)
        memset(jwt.data, 0, jwt.len);
    shard_buf_free(&jwt);
    if (rc && a->mode == AUTH_METADATA) { /* no metadata server: anonymous, as the libraries */
        a->metadata_failed = 1;
        shard_buf_free(&body);
        return 0;
    }
    if (!rc && status != 200) {
        char reason[256];
        shard_store_reason((char *)body.data, reason, sizeof reason);
        const char *code = NULL, *e = NULL;
        json_t *ej = json_loads((char *)body.data, 0, NULL);
        if (ej) { /* OAuth2's error code and description, never the request */
            code = json_string_value(json_object_get(ej, "error"));
            e = json_string_value(json_object_get(ej, "error_description"));
        }
        rc = shard_fail(err, SHARD_ERR_IO,
                        "getting a Google access token from %s: HTTP %ld%s%s%.60s%s%.200s", where,
                        status, code ? "" : reason, code ? ": " : "", code ? code : "",
                        e ? ": " : "", e ? e : "");
        json_decref(ej);
    }
    char *tok = NULL;
    double life = 0;
    if (!rc && !(rc = shard_gcs_parse_token((char *)body.data, where, &tok, &life, err))) {
        shard_secret_free(a->token);
        a->token = tok;
        /* refresh a minute early, or halfway through a short-lived token */
        double margin = life > 120 ? 60 : life / 2;
        a->expires = wall_now() + life - margin;
    }
    if (body.data)
        memset(body.data, 0, body.len);
    shard_buf_free(&body);
    return rc;
}

/* Adds the Authorization header (if any) and gives the endpoint. */
static int authorize(ShardRemote *r, ShardRequest *q, char **endpoint, char *err)
{
    pthread_mutex_lock(&r->auth_mu);
    int rc = 0;
    if (!r->gcs) {
        ShardGcsAuth *a = calloc(1, sizeof *a);
        if (!a)
            rc = shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
        else if ((rc = auth_load(r, a, err)))
            shard_gcs_auth_free(a);
        else
            r->gcs = a;
    }
    ShardGcsAuth *a = r->gcs;
    if (!rc && (a->mode == AUTH_KEY || (a->mode == AUTH_METADATA && !a->metadata_failed)) &&
        (!a->token || wall_now() >= a->expires))
        rc = refresh(r, a, err);
    if (!rc && a->token && !(a->mode == AUTH_METADATA && a->metadata_failed))
        rc = shard_request_header(q, "Authorization: Bearer %s", a->token)
                 ? shard_fail(err, SHARD_ERR_NOMEM, "out of memory")
                 : 0;
    if (!rc && !(*endpoint = strdup(a->endpoint)))
        rc = shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    pthread_mutex_unlock(&r->auth_mu);
    return rc;
}

int shard_gcs_request(ShardRemote *r, const ShardObject *o, const char *generation,
                      ShardRequest *q, char *err)
{
    char *ep = NULL;
    int rc = authorize(r, q, &ep, err);
    if (rc)
        return rc;
    ShardBuf u = {0};
    rc = shard_buf_printf(&u, "%s/storage/v1/b/", ep) || shard_url_encode(&u, o->bucket, 0) ||
         shard_buf_printf(&u, "/o/") || shard_url_encode(&u, o->key, 0) ||
         shard_buf_printf(&u, "?alt=media");
    if (!rc && generation && *generation)
        rc = shard_buf_printf(&u, "&generation=%s", generation);
    free(ep);
    q->url = (char *)u.data;
    return rc ? shard_fail(err, SHARD_ERR_NOMEM, "out of memory") : 0;
}

int shard_gcs_write_request(ShardRemote *r, const ShardObject *o, const char *what,
                            const char *session, ShardRequest *q, char *err)
{
    char *ep = NULL;
    int rc = authorize(r, q, &ep, err);
    if (rc)
        return rc;
    ShardBuf u = {0};
    if (session) /* a resumable upload's session URI, as the store gave it */
        rc = shard_buf_printf(&u, "%s", session);
    else if (!strcmp(what, "delete"))
        rc = shard_buf_printf(&u, "%s/storage/v1/b/", ep) || shard_url_encode(&u, o->bucket, 0) ||
             shard_buf_printf(&u, "/o/") || shard_url_encode(&u, o->key, 0);
    else /* uploadType=media or resumable */
        rc = shard_buf_printf(&u, "%s/upload/storage/v1/b/", ep) || shard_url_encode(&u, o->bucket, 0) ||
             shard_buf_printf(&u, "/o?uploadType=%s&name=", what) || shard_url_encode(&u, o->key, 0);
    free(ep);
    q->url = (char *)u.data;
    return rc ? shard_fail(err, SHARD_ERR_NOMEM, "out of memory") : 0;
}

typedef struct ListPage {
    ShardRemote *r;
    const ShardObject *o;
    const char *token;
} ListPage;

static int build_list(void *cookie, ShardRequest *q, char *err)
{
    ListPage *lp = cookie;
    char *ep = NULL;
    int rc = authorize(lp->r, q, &ep, err);
    if (rc)
        return rc;
    ShardBuf u = {0};
    rc = shard_buf_printf(&u, "%s/storage/v1/b/", ep) || shard_url_encode(&u, lp->o->bucket, 0) ||
         shard_buf_printf(&u, "/o?prefix=") || shard_url_encode(&u, lp->o->key, 0);
    if (!rc && lp->token)
        rc = shard_buf_printf(&u, "&pageToken=") || shard_url_encode(&u, lp->token, 0);
    free(ep);
    q->url = (char *)u.data;
    return rc ? shard_fail(err, SHARD_ERR_NOMEM, "out of memory") : 0;
}

int shard_gcs_parse_page(const char *body, const ShardObject *prefix, ShardListFn fn,
                         void *cookie, char **next, char *err)
{
    *next = NULL;
    json_error_t je;
    json_t *j = json_loads(body, 0, &je);
    if (!j)
        return shard_fail(err, SHARD_ERR_FORMAT, "%s: the listing is not JSON: %s", prefix->url,
                          je.text);
    ShardBuf url = {0};
    int rc = 0;
    json_t *items = json_object_get(j, "items");
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it) {
        const char *name = json_string_value(json_object_get(it, "name"));
        const char *size = json_string_value(json_object_get(it, "size"));
        if (!name)
            continue;
        url.len = 0;
        if (shard_buf_printf(&url, "gs://%s/%s", prefix->bucket, name)) {
            rc = shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
            break;
        }
        if ((rc = fn(cookie, (char *)url.data, size ? strtoull(size, NULL, 10) : 0)))
            break;
    }
    const char *token = json_string_value(json_object_get(j, "nextPageToken"));
    if (!rc && token && *token && !(*next = strdup(token)))
        rc = shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    json_decref(j);
    shard_buf_free(&url);
    return rc;
}

int shard_gcs_list(ShardRemote *r, const ShardObject *prefix, ShardListFn fn, void *cookie,
                   char *err)
{
    ShardBuf body = {0};
    ListPage lp = {r, prefix, NULL};
    char *token = NULL;
    int rc = 0;
    for (;;) {
        if ((rc = shard_list_page(r, prefix->url, build_list, &lp, &body, err)))
            break;
        char *next;
        rc = shard_gcs_parse_page((const char *)body.data, prefix, fn, cookie, &next, err);
        free(token);
        token = next;
        if (rc || !token)
            break;
        lp.token = token;
    }
    free(token);
    shard_buf_free(&body);
    return rc;
}
