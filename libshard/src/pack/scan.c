/*
 * The pack plan's input scan (shard/pack.h, shard_pack_plan_scan): an ImageFolder tree
 * (folder.c) or a list file (listfile.c) into the plan's inputs and class names (inputs.c), in
 * the order formats/shard.md section 1 gives. It lives in the library so that shardpack, a Python packer and the workers of a
 * cluster all plan from the same list of inputs.
 *
 * A bad input is reported through the callback and the scan goes on, so that one run names
 * every bad file; the scan then fails with the first one unless each was left out.
 * */
#include <string.h>

#include "base/error.h"
#include "pack/folder.h"
#include "pack/inputs.h"
#include "pack/listfile.h"
#include "shard/pack.h"

int shard_pack_plan_scan(ShardPackPlan *p, const char *src, int list, const ShardPackScanCallbacks *cb,
                         uint64_t *ignored, ShardError *err)
{
    Scan c;
    memset(&c, 0, sizeof c);
    c.plan = p;
    c.cb = cb;
    if (ignored)
        *ignored = 0;
    if (!p || !src)
        return shard_report(err, SHARD_ERR_INVALID, "pack scan: no plan or no source");
    int rc = list ? shard_scan_list(&c, src, err) : shard_scan_folder(&c, src, err);
    if (!rc && c.nomem)
        rc = SHARD_ERR_NOMEM;
    if (!rc && c.failed)
        rc = shard_report(err, c.first_code, c.first);
    size_t live = 0;
    for (size_t i = 0; i < c.n; i++)
        live += !c.v[i].dropped;
    if (!rc && live == 0) {
        char msg[SHARD_ERROR_MAX];
        shard_fail(msg, SHARD_ERR_INVALID, "%s: no images found", src);
        rc = shard_report(err, SHARD_ERR_INVALID, msg);
    }
    for (size_t i = 0; i < c.n && !rc; i++) {
        const Item *x = &c.v[i];
        if (x->dropped)
            continue;
        ShardPackInput in = {x->path, x->rel, x->field, x->label,
                             x->named ? c.classes[x->class_index] : NULL, x->extra, x->size};
        rc = shard_pack_plan_add(p, &in);
    }
    if (!rc)
        rc = shard_pack_plan_set_classes(p, (const char *const *)c.classes, c.nclasses);
    if (rc == SHARD_ERR_NOMEM)
        shard_report(err, rc, "pack scan: out of memory");
    else if (rc && err && !err->message[0])
        shard_report(err, rc, "pack scan failed");
    if (ignored)
        *ignored = c.ignored;
    shard_scan_free(&c);
    return rc;
}
