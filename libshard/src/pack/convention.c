/*
 * The sample convention (convention.h): an input file's fields, the image, its class index
 * (.cls) and its description (.json).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/url.h"
#include "pack/packplandef.h"
#include "pack/convention.h"
#include "pack/shrink.h"
#include "remote/store.h"
#include "shard/writer.h"

/* The sample's .json: its extra fields, path, label and class (and, resized, the
 * original's size). */
char *shard_pack_sample_json(const Input *x, const ShardShrunk *shrunk)
{
    json_t *o = x->extra ? json_loads(x->extra, 0, NULL) : json_object();
    if (!o)
        return NULL;
    if (shrunk && shrunk->data) {
        json_object_set_new(o, "original_width", json_integer(shrunk->width));
        json_object_set_new(o, "original_height", json_integer(shrunk->height));
    }
    json_object_set_new(o, "path", json_string(x->rel));
    if (shard_store_can(x->path) & SHARD_STORE_COSTLY) { /* as a log may show it */
        char shown[4096];
        shard_url_display(x->path, shown, sizeof shown);
        json_object_set_new(o, "url", json_string(shown));
    }
    if (x->in.label >= 0)
        json_object_set_new(o, "label", json_integer(x->in.label));
    if (x->class_name)
        json_object_set_new(o, "class", json_string(x->class_name));
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    return s;
}

/* The fields of input x: image, cls (when labelled) and json. */
size_t shard_pack_sample_fields(const Input *x, ShardField *f, const void *image, size_t image_size,
                            char *cls, const char *json)
{
    size_t n = 0;
    f[n++] = (ShardField){x->field, image, image_size};
    if (x->in.label >= 0) {
        int k = snprintf(cls, 24, "%lld", (long long)x->in.label);
        f[n++] = (ShardField){"cls", cls, (size_t)k};
    }
    f[n++] = (ShardField){"json", json, strlen(json)};
    return n;
}

uint64_t shard_pack_sample_size(const Input *x)
{
    char *json = shard_pack_sample_json(x, NULL);
    char cls[24];
    ShardField f[3];
    ShardSample s = {x->key, f, shard_pack_sample_fields(x, f, NULL, x->in.size, cls, json ? json : "")};
    uint64_t size = shard_writer_sample_size(&s);
    free(json);
    return size;
}
