/*
 * nvJPEG opened at run time (nvjpeg.h): the same libshard loads where there is none, and
 * says so only when a GPU decode is asked for.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "gpu/nvjpeg.h"

const char *shard_nvjpeg_status(nvjpegStatus_t s)
{
    static const char *const names[] = {
        "NVJPEG_STATUS_SUCCESS",          "NVJPEG_STATUS_NOT_INITIALIZED",
        "NVJPEG_STATUS_INVALID_PARAMETER", "NVJPEG_STATUS_BAD_JPEG",
        "NVJPEG_STATUS_JPEG_NOT_SUPPORTED", "NVJPEG_STATUS_ALLOCATOR_FAILURE",
        "NVJPEG_STATUS_EXECUTION_FAILED",  "NVJPEG_STATUS_ARCH_MISMATCH",
        "NVJPEG_STATUS_INTERNAL_ERROR",    "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED",
        "NVJPEG_STATUS_INCOMPLETE_BITSTREAM",
    };
    return s >= 0 && s < (int)(sizeof names / sizeof *names) ? names[s] : "NVJPEG_STATUS_?";
}

#define SYM(field, name)                                                                      \
    do {                                                                                      \
        *(void **)&j->field = dlsym(j->lib, name);                                            \
        if (!j->field) {                                                                      \
            missing = name;                                                                   \
            goto fail;                                                                        \
        }                                                                                     \
    } while (0)

int shard_nvjpeg_load(ShardNvjpeg *j, const char *path, char *msg)
{
    memset(j, 0, sizeof *j);
    /* the toolkit's, by soname: CUDA 13's first, then 12's (the ABI used is in both) */
    static const char *const names[] = {"libnvjpeg.so.13", "libnvjpeg.so.12"};
    const char *err = "";
    if (path && *path) {
        j->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!j->lib)
            err = dlerror();
        snprintf(j->path, sizeof j->path, "%s", path);
    } else {
        for (size_t k = 0; k < sizeof names / sizeof *names && !j->lib; k++) {
            j->lib = dlopen(names[k], RTLD_NOW | RTLD_LOCAL);
            if (!j->lib)
                err = dlerror();
            snprintf(j->path, sizeof j->path, "%s", names[k]);
        }
    }
    if (!j->lib)
        return shard_fail(msg, SHARD_ERR_NOCUDA,
                          "no nvJPEG (%s: %s): the GPU's JPEG decoder needs the CUDA "
                          "toolkit's libnvjpeg.so.13 or .12 where the dynamic loader finds it "
                          "(LD_LIBRARY_PATH), or its path in SHARD_NVJPEG",
                          path && *path ? path : "libnvjpeg.so.13, libnvjpeg.so.12", err);
    const char *missing = NULL;
    SYM(GetProperty, "nvjpegGetProperty");
    SYM(CreateEx, "nvjpegCreateEx");
    SYM(Destroy, "nvjpegDestroy");
    SYM(JpegStateCreate, "nvjpegJpegStateCreate");
    SYM(JpegStateDestroy, "nvjpegJpegStateDestroy");
    SYM(GetImageInfo, "nvjpegGetImageInfo");
    SYM(DecodeBatchedInitialize, "nvjpegDecodeBatchedInitialize");
    SYM(DecodeBatched, "nvjpegDecodeBatched");
    for (int k = 0; k < 3; k++)
        j->GetProperty(k, &j->version[k]);
    if (j->version[0] < 12) {
        shard_fail(msg, SHARD_ERR_NOCUDA,
                   "nvJPEG %d.%d.%d (%s) is too old: the GPU's JPEG decoder needs 12 or later",
                   j->version[0], j->version[1], j->version[2], j->path);
        dlclose(j->lib);
        memset(j, 0, sizeof *j);
        return SHARD_ERR_NOCUDA;
    }
    return 0;
fail:
    shard_fail(msg, SHARD_ERR_NOCUDA, "the nvJPEG found (%s) lacks %s, which libshard calls",
               j->path, missing);
    dlclose(j->lib);
    memset(j, 0, sizeof *j);
    return SHARD_ERR_NOCUDA;
}

/* Kept mapped, as the driver is (driver.c): nvJPEG's own threads may outlive a handle. */
void shard_nvjpeg_unload(ShardNvjpeg *j) { memset(j, 0, sizeof *j); }
