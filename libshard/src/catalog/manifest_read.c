/*
 * Reading a manifest (shard/manifest.h: shard_manifest_read, shard_manifest_parse;
 * catalog/manifest.h: through a caller's ShardRemote): every field checked, relative shard
 * URLs resolved against the manifest's own location.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/url.h"
#include "catalog/manifest.h"
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

/* The most a manifest may take: a million shards at a few hundred bytes each. */
#define MAX_MANIFEST_BYTES ((size_t)1 << 30)

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

int shard_manifest_parse(ShardManifest **out, const char *text, size_t len, const char *path,
                         ShardError *err)
{
    char msg[SHARD_ERROR_MAX];
    *out = NULL;
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        shard_fail(msg, SHARD_ERR_FORMAT, "%s: line %d, column %d (byte %d): %s", path,
                   je.line, je.column, je.position, je.text);
        return shard_report(err, SHARD_ERR_FORMAT, msg);
    }
    int rc = SHARD_ERR_FORMAT;
    ShardManifest *m = NULL;
    json_t *list = json_object_get(root, "shardlist");
    const char *kind = json_string_value(json_object_get(root, "__kind__"));
    if (!json_is_object(root) || !json_is_array(list)) {
        rc = bad(err, path, "no \"shardlist\" array");
        goto out;
    }
    if (kind && strcmp(kind, WIDS_KIND)) {
        rc = bad(err, path, "\"__kind__\" is not \"" WIDS_KIND "\"");
        goto out;
    }
    if (shard_manifest_new(&m, json_string_value(json_object_get(root, "name")))) {
        rc = shard_report(err, SHARD_ERR_NOMEM, "manifest: out of memory");
        goto out;
    }
    size_t i;
    json_t *o;
    json_array_foreach(list, i, o) {
        const char *url = json_string_value(json_object_get(o, "url"));
        ShardFileInfo info = {0};
        if (!json_is_object(o) || !url || !*url || get_u64(o, "nsamples", &info.nsamples, 1) ||
            get_u64(o, "filesize", &info.filesize, 0) || get_u64(o, "tarsize", &info.tarsize, 0) ||
            get_hex(o, "md5sum", info.md5, sizeof info.md5) ||
            get_hex(o, "sha256", info.sha256, sizeof info.sha256)) {
            snprintf(msg, sizeof msg, "shardlist[%zu] lacks a valid url or nsamples, or has a "
                                      "malformed filesize, md5sum or sha256", i);
            rc = bad(err, path, msg);
            goto out;
        }
        char *full = shard_url_resolve(path, url);
        info.url = full;
        int arc = full ? shard_manifest_add(m, &info) : SHARD_ERR_NOMEM;
        free(full);
        if (arc) {
            rc = shard_report(err, arc, "manifest: out of memory");
            goto out;
        }
    }
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
