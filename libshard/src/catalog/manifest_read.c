/*
 * Reading a manifest (shard/manifest.h: shard_manifest_read, shard_manifest_parse;
 * catalog/manifest_remote.h: through a caller's ShardRemote): every field checked, relative shard
 * URLs resolved against the manifest's own location.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/url.h"
#include "catalog/jsonscan.h"
#include "catalog/manifest_remote.h"
#include "catalog/manifestdef.h"
#include "source/open.h"

static int bad(ShardError *err, const char *path, const char *what)
{
    char msg[SHARD_ERROR_MAX];
    shard_fail(msg, SHARD_ERR_FORMAT, "%s: not a libshard/wids manifest: %s", path, what);
    return shard_report(err, SHARD_ERR_FORMAT, msg);
}

static int get_u64(json_t *o, const char *key, uint64_t *v, int required)
{
    json_t *x = json_object_get(o, key);
    if (!x)
        return required ? -1 : 0;
    if (!json_is_integer(x) || json_integer_value(x) < 0)
        return -1;
    *v = (uint64_t)json_integer_value(x);
    return 0;
}

static int get_hex(json_t *o, const char *key, char *out, size_t len)
{
    json_t *x = json_object_get(o, key);
    out[0] = 0;
    if (!x)
        return 0;
    const char *s = json_string_value(x);
    if (!s || strlen(s) != len - 1)
        return -1;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || (*p >= 'A' && *p <= 'F')))
            return -1;
    memcpy(out, s, len);
    return 0;
}

/* The most a manifest may take: a million shards at a few hundred bytes each. Parsed one
 * shard at a time, its memory is the text and the entries (under 300 bytes a shard): under
 * 600 MiB at both limits, under 4x the text for entries of their usual size. */
#define MAX_MANIFEST_BYTES ((size_t)256 << 20)
#define MAX_MANIFEST_SHARDS ((size_t)1 << 20)
/* What jansson builds whole (about 20 bytes a byte of text): a shard's entry, and each other
 * member of the top object (a name, classes, options). */
#define MAX_SHARD_TEXT ((size_t)64 << 10)
#define MAX_MEMBER_TEXT ((size_t)4 << 20)

int shard_manifest_read(ShardManifest **out, const char *path, ShardError *err)
{
    return shard_manifest_read_remote(out, path, NULL, err);
}

int shard_manifest_read_remote(ShardManifest **out, const char *path, ShardRemote *remote,
                               ShardError *err)
{
    *out = NULL;
    char msg[SHARD_ERROR_MAX];
    ShardBuf b = {0};
    int rc = shard_source_slurp(path, remote, &b, MAX_MANIFEST_BYTES, msg);
    if (!rc)
        rc = shard_manifest_parse(out, (const char *)b.data, b.len, path, err);
    else
        shard_report(err, rc, msg);
    shard_buf_free(&b);
    return rc;
}

/* A JSON syntax error at byte at of text, with its line and column, as jansson words its. */
static int syntax(ShardError *err, const char *path, const char *text, size_t at,
                  const char *what)
{
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at; i++)
        if (text[i] == '\n')
            line++, col = 1;
        else
            col++;
    char msg[SHARD_ERROR_MAX];
    shard_fail(msg, SHARD_ERR_FORMAT, "%s: line %zu, column %zu (byte %zu): %s", path, line, col,
               at, what);
    return shard_report(err, SHARD_ERR_FORMAT, msg);
}

/* The value at [from, to) of text, parsed; NULL with err set. */
static json_t *load_slice(const char *text, size_t from, size_t to, const char *path,
                          ShardError *err)
{
    json_error_t je;
    json_t *v = json_loadb(text + from, to - from, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (!v)
        syntax(err, path, text, from + (size_t)(je.position > 0 ? je.position : 0), je.text);
    return v;
}

/* The end of the value at pos; SHARD_ERR_FORMAT with err set where there is none. */
static int extent(const char *text, size_t len, size_t pos, size_t *end, const char *path,
                  ShardError *err)
{
    int rc = shard_json_extent(text, len, pos, end);
    if (rc == -2) {
        char msg[96];
        snprintf(msg, sizeof msg, "nested more than %d deep", SHARD_JSON_MAX_DEPTH);
        return syntax(err, path, text, pos, msg);
    }
    if (rc) {
        shard_json_ws(text, len, &pos);
        return syntax(err, path, text, pos, pos < len ? "not a JSON value" : "the text ends");
    }
    return 0;
}

/* Shard i of the list, the object o, into m. */
static int add_shard(ShardManifest *m, json_t *o, size_t i, const char *path, ShardError *err)
{
    const char *url = json_string_value(json_object_get(o, "url"));
    ShardFileInfo info = {0};
    if (!json_is_object(o) || !url || !*url || get_u64(o, "nsamples", &info.nsamples, 1) ||
        get_u64(o, "filesize", &info.filesize, 0) || get_u64(o, "tarsize", &info.tarsize, 0) ||
        get_hex(o, "md5sum", info.md5, sizeof info.md5) ||
        get_hex(o, "sha256", info.sha256, sizeof info.sha256)) {
        char msg[160];
        snprintf(msg, sizeof msg, "shardlist[%zu] lacks a valid url or nsamples, or has a "
                                  "malformed filesize, md5sum or sha256", i);
        return bad(err, path, msg);
    }
    if (i >= MAX_MANIFEST_SHARDS) {
        char msg[96];
        snprintf(msg, sizeof msg, "more than %zu shards", MAX_MANIFEST_SHARDS);
        return bad(err, path, msg);
    }
    char *full = shard_url_resolve(path, url);
    info.url = full;
    int rc = full ? shard_manifest_add(m, &info) : SHARD_ERR_NOMEM;
    free(full);
    const char *dataset = json_string_value(json_object_get(o, "dataset"));
    if (!rc && dataset)
        rc = shard_manifest_set_dataset(m, m->n - 1, dataset);
    return rc ? shard_report(err, rc, "manifest: out of memory") : 0;
}

/* The "shardlist" array at [from, to): each element parsed alone, into m. */
static int read_list(ShardManifest *m, const char *text, size_t from, size_t to, const char *path,
                     ShardError *err)
{
    size_t pos = from + 1, i = 0;
    shard_json_ws(text, to, &pos);
    if (pos < to && text[pos] == ']')
        return 0;
    for (;; i++) {
        size_t end;
        int rc = extent(text, to, pos, &end, path, err);
        if (rc)
            return rc;
        if (end - pos > MAX_SHARD_TEXT) { /* jansson builds it whole: about 20 times its text */
            char msg[128];
            snprintf(msg, sizeof msg, "shardlist[%zu] is %zu bytes of text, more than %zu", i,
                     end - pos, (size_t)MAX_SHARD_TEXT);
            return bad(err, path, msg);
        }
        json_t *o = load_slice(text, pos, end, path, err);
        if (!o)
            return SHARD_ERR_FORMAT;
        rc = add_shard(m, o, i, path, err);
        json_decref(o);
        if (rc)
            return rc;
        pos = end;
        shard_json_ws(text, to, &pos);
        if (pos < to && text[pos] == ',')
            pos++;
        else if (pos < to && text[pos] == ']')
            return 0;
        else
            return syntax(err, path, text, pos, "',' or ']' expected");
    }
}

/* The top-level members but the shard list (small), and the list read into m. */
static int read_top(ShardManifest *m, json_t *top, const char *text, size_t len,
                    const char *path, ShardError *err)
{
    size_t pos = 0;
    shard_json_ws(text, len, &pos);
    if (pos >= len || text[pos] != '{')
        return bad(err, path, "no \"shardlist\" array");
    pos++;
    shard_json_ws(text, len, &pos);
    int have_list = 0;
    if (pos < len && text[pos] == '}')
        pos++;
    else
        for (;;) {
            size_t end;
            int rc = extent(text, len, pos, &end, path, err);
            if (rc)
                return rc;
            json_t *k = text[pos] == '"' ? load_slice(text, pos, end, path, err) : NULL;
            if (!k)
                return text[pos] == '"' ? SHARD_ERR_FORMAT
                                        : syntax(err, path, text, pos, "a string key expected");
            char *key = strdup(json_string_value(k));
            json_decref(k);
            if (!key)
                return shard_report(err, SHARD_ERR_NOMEM, "manifest: out of memory");
            pos = end;
            shard_json_ws(text, len, &pos);
            if (pos >= len || text[pos] != ':') {
                free(key);
                return syntax(err, path, text, pos, "':' expected");
            }
            pos++;
            shard_json_ws(text, len, &pos);
            if ((rc = extent(text, len, pos, &end, path, err))) {
                free(key);
                return rc;
            }
            if (json_object_get(top, key) || (have_list && !strcmp(key, "shardlist"))) {
                free(key);
                return syntax(err, path, text, pos, "duplicate object key");
            }
            if (!strcmp(key, "shardlist") && text[pos] == '[') {
                have_list = 1;
                rc = read_list(m, text, pos, end, path, err);
            } else if (end - pos > MAX_MEMBER_TEXT) { /* built whole, as a shard's */
                char msg[160];
                snprintf(msg, sizeof msg, "member \"%.40s\" is %zu bytes of text, more than "
                         "%zu", key, end - pos, (size_t)MAX_MEMBER_TEXT);
                rc = bad(err, path, msg);
            } else {
                json_t *v = load_slice(text, pos, end, path, err);
                rc = v ? json_object_set_new(top, key, v) : SHARD_ERR_FORMAT;
            }
            free(key);
            if (rc)
                return rc == -1 ? shard_report(err, SHARD_ERR_NOMEM, "manifest: out of memory")
                                : rc;
            pos = end;
            shard_json_ws(text, len, &pos);
            if (pos < len && text[pos] == ',') {
                pos++;
                shard_json_ws(text, len, &pos);
            } else if (pos < len && text[pos] == '}') {
                pos++;
                break;
            } else {
                return syntax(err, path, text, pos, "',' or '}' expected");
            }
        }
    shard_json_ws(text, len, &pos);
    if (pos < len)
        return syntax(err, path, text, pos, "end of file expected");
    return have_list ? 0 : bad(err, path, "no \"shardlist\" array");
}

int shard_manifest_parse(ShardManifest **out, const char *text, size_t len, const char *path,
                         ShardError *err)
{
    *out = NULL;
    ShardManifest *m = NULL;
    json_t *root = json_object();
    if (!root || shard_manifest_new(&m, NULL)) {
        json_decref(root);
        return shard_report(err, SHARD_ERR_NOMEM, "manifest: out of memory");
    }
    int rc = read_top(m, root, text, len, path, err);
    if (rc)
        goto out;
    rc = SHARD_ERR_FORMAT;
    const char *kind = json_string_value(json_object_get(root, "__kind__"));
    if (kind && strcmp(kind, WIDS_KIND)) {
        rc = bad(err, path, "\"__kind__\" is not \"" WIDS_KIND "\"");
        goto out;
    }
    if (shard_manifest_set_name(m, json_string_value(json_object_get(root, "name")))) {
        rc = shard_report(err, SHARD_ERR_NOMEM, "manifest: out of memory");
        goto out;
    }
    size_t i;
    json_t *lib = json_object_get(root, "libshard");
    if (lib) {
        json_t *classes = json_object_get(lib, "classes");
        json_t *options = json_object_get(lib, "options");
        json_t *part = json_object_get(lib, "part");
        json_int_t pi = 0, pn = 0, ps = 0;
        if (part && (json_unpack(part, "{s:I,s:I,s:I}", "index", &pi, "of", &pn, "shards", &ps) ||
                     pi < 0 || pn <= pi || ps < 0)) {
            rc = bad(err, path, "\"libshard.part\" is not {\"index\", \"of\", \"shards\"} "
                     "with index < of");
            goto out;
        }
        if (part)
            shard_manifest_set_part(m, (size_t)pi, (size_t)pn, (size_t)ps);
        if (classes) {
            if (!json_is_array(classes)) {
                rc = bad(err, path, "\"libshard.classes\" is not an array");
                goto out;
            }
            size_t n = json_array_size(classes);
            const char **names = calloc(n ? n : 1, sizeof *names);
            if (!names) {
                rc = shard_report(err, SHARD_ERR_NOMEM, "manifest: out of memory");
                goto out;
            }
            json_t *c;
            int ok = 1;
            json_array_foreach(classes, i, c) {
                if (!(names[i] = json_string_value(c)))
                    ok = 0;
            }
            int crc = ok ? shard_manifest_set_classes(m, names, n) : SHARD_ERR_FORMAT;
            free(names);
            if (crc) {
                rc = crc == SHARD_ERR_FORMAT ? bad(err, path, "a class name is not a string")
                                             : shard_report(err, crc, "manifest: out of memory");
                goto out;
            }
        }
        if (options) {
            char *text = json_is_object(options) ? json_dumps(options, JSON_COMPACT) : NULL;
            if (!text) {
                rc = bad(err, path, "\"libshard.options\" is not an object");
                goto out;
            }
            free(m->options);
            m->options = text;
        }
    }
    rc = 0;
    *out = m;
    m = NULL;
out:
    shard_manifest_free(&m);
    json_decref(root);
    return rc;
}
