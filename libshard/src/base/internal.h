/*
 * Private helpers shared by the library's modules. Not installed.
 */
#ifndef SHARD_INTERNAL_H
#define SHARD_INTERNAL_H

#include <stdarg.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "shard/common.h"
#include "shard/writer.h"

#define SHARD_HIDDEN __attribute__((visibility("hidden")))
#define SHARD_PRINTF(f, a) __attribute__((format(printf, f, a)))

/* Formats a message into buf (SHARD_ERROR_MAX bytes) and returns code, so a failure
 * reads `return shard_fail(w->err, SHARD_ERR_IO, "...", ...);`. */
SHARD_HIDDEN int shard_fail(char *buf, int code, const char *fmt, ...) SHARD_PRINTF(3, 4);

/* Escapes a message's control characters in place (shard_escape), as shard_fail and
 * shard_report do: names from shards may hold terminal escape sequences. */
SHARD_HIDDEN void shard_escape_message(char *buf, size_t size);

/* Copies a message into an optional ShardError and returns code. */
SHARD_HIDDEN int shard_report(ShardError *err, int code, const char *msg);

/* The return code for an errno value: full disk and quota become SHARD_ERR_NOSPACE,
 * a missing file SHARD_ERR_NOT_FOUND, the rest SHARD_ERR_IO. */
SHARD_HIDDEN int shard_errno_code(int e);

/* memcpy for bytes another thread reads next (copy.c): streaming stores where the CPU has
 * them, so that the lines do not travel from the writer's cache to the reader's. */
SHARD_HIDDEN void shard_copy_handoff(void *dst, const void *src, size_t n);

/* A growable byte buffer. */
typedef struct ShardBuf {
    unsigned char *data;
    size_t len, cap;
} ShardBuf;

SHARD_HIDDEN int shard_buf_reserve(ShardBuf *b, size_t extra);
SHARD_HIDDEN int shard_buf_append(ShardBuf *b, const void *p, size_t n);
SHARD_HIDDEN int shard_buf_printf(ShardBuf *b, const char *fmt, ...) SHARD_PRINTF(2, 3);
SHARD_HIDDEN void shard_buf_free(ShardBuf *b);

SHARD_HIDDEN char *shard_strdup(const char *s);

/* strcasecmp for ASCII letters only, whatever the locale (Python sets LC_CTYPE from the
 * environment, and strcasecmp would then fold other bytes too): as formats/shard.md 2.2
 * compares field names. */
static inline int shard_ascii_casecmp(const char *a, const char *b)
{
    for (;; a++, b++) {
        int x = (unsigned char)*a, y = (unsigned char)*b;
        x += (x >= 'A' && x <= 'Z') ? 'a' - 'A' : 0;
        y += (y >= 'A' && y <= 'Z') ? 'a' - 'A' : 0;
        if (x != y || !x)
            return x - y;
    }
}

/* Whether s ends with suffix. */
SHARD_HIDDEN int shard_ends_with(const char *s, const char *suffix);

/* pthread_create for a library thread: every signal blocked in it, as signals belong to
 * the application's threads (Python's main thread among them). 0 or pthread_create's code. */
SHARD_HIDDEN int shard_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

/* The folder part of a path (dirname), malloc'd; NULL when out of memory. */
SHARD_HIDDEN char *shard_dir_of(const char *path);

/* Whether a writer with this compression setting and pattern writes .tar.zst (writer.c). */
SHARD_HIDDEN int shard_writes_zstd(int compression, const char *pattern);

/* Grows *(void **)buf, of capacity *cap, to at least need bytes through the allocator a
 * (doubling from 256), keeping its first keep bytes; the old block goes back to a. */
SHARD_HIDDEN int shard_alloc_grow(const ShardAllocator *a, void *buf, size_t *cap, size_t need,
                                  size_t keep);

typedef struct ShardHasher ShardHasher;

/* A file written under a hidden temporary name in its final folder and renamed into
 * place by commit, so readers never see it incomplete. Writes are buffered; MD5 and
 * SHA-256 of the bytes are computed on the way when asked, each on a thread of its own that
 * hashes one buffer while the caller fills the other. */
typedef struct ShardAtomicFile {
    int fd;
    int sync;
    char *final_path;
    char *tmp_path;
    unsigned char *buf;   /* being filled */
    unsigned char *spare; /* being hashed (with checksums), else NULL */
    size_t len, cap;
    uint64_t written;
    uint64_t writeback;  /* bytes before this were handed to the kernel's writeback */
    ShardHasher *md5;    /* NULL unless SHARD_DIGEST_MD5 */
    ShardHasher *sha256; /* NULL unless SHARD_DIGEST_SHA256 */
} ShardAtomicFile;

SHARD_HIDDEN int shard_afile_open(ShardAtomicFile *f, const char *final_path, int sync,
                                  int checksums, char *err);
SHARD_HIDDEN int shard_afile_write(ShardAtomicFile *f, const void *p, size_t n, char *err);
/* Flushes, fsyncs (when sync), renames into place and fsyncs the folder. Hex digests
 * go to md5/sha256 (33 and 65 bytes), "" for one not asked for (checksums: SHARD_DIGEST_*
 * bits); either may be NULL. */
SHARD_HIDDEN int shard_afile_commit(ShardAtomicFile *f, char *md5, char *sha256, char *err);
/* Closes and removes the temporary file; safe to call on a committed or zeroed file. */
SHARD_HIDDEN void shard_afile_abort(ShardAtomicFile *f);

/* MD5 and/or SHA-256 of bytes given block by block (a whole object read through a source). */
typedef struct ShardDigests {
    void *md5, *sha256;
    uint64_t total;
} ShardDigests;
SHARD_HIDDEN int shard_digests_init(ShardDigests *d, int which); /* SHARD_DIGEST_* bits */
SHARD_HIDDEN void shard_digests_update(ShardDigests *d, const void *p, size_t n);
/* Hex digests (md5: 33 bytes, sha256: 65 bytes; either may be NULL); frees d's state. */
SHARD_HIDDEN void shard_digests_final(ShardDigests *d, char *md5, char *sha256);

/* Reusable buffers for decoding and resampling, one set per thread (scratch.c): no
 * allocation per sample once they have grown to the largest image. Zero-initialize. */
enum {
    SHARD_SCR_PIXELS, /* the decoded image (or box of it) */
    SHARD_SCR_ROWS,   /* row pointers for libjpeg */
    SHARD_SCR_CMYK,   /* one CMYK row */
    SHARD_SCR_RESIZED, SHARD_SCR_HB, SHARD_SCR_HK, SHARD_SCR_VB, SHARD_SCR_VK, SHARD_SCR_KD,
    SHARD_SCR_BAND, SHARD_SCR_START, SHARD_SCR_KV, SHARD_SCR_ROWF, SHARD_SCR_VW, SHARD_SCR_VROW,
    SHARD_SCR_ROWOUT, SHARD_SCR_KH, SHARD_SCR_TMP, SHARD_SCR_ACC, SHARD_SCR_RGB,
    SHARD_SCRATCH_N
};
typedef struct ShardScratch {
    void *buf[SHARD_SCRATCH_N];
    size_t cap[SHARD_SCRATCH_N];
    void *jpeg;                   /* a reusable libjpeg decompressor (decode.c), or NULL */
    void (*jpeg_free)(void *jpeg);
    int simd;                     /* resize.c: the SIMD level in use plus 1; 0 until known */
} ShardScratch;

/* Buffer `which`, at least size bytes, 64-byte aligned, contents undefined; NULL when out
 * of memory. Valid until the next call for the same buffer. */
SHARD_HIDDEN void *shard_scratch(ShardScratch *s, int which, size_t size);
/* Hands buffer `which` to the caller (free() it); the scratch forgets it. */
SHARD_HIDDEN void *shard_scratch_take(ShardScratch *s, int which);
/* Frees the buffers larger than keep bytes (they grow again if needed). */
SHARD_HIDDEN void shard_scratch_trim(ShardScratch *s, size_t keep);
SHARD_HIDDEN void shard_scratch_release(ShardScratch *s);

/* Seconds from a monotonic clock (CLOCK_MONOTONIC): stage timing (queue.c). */
SHARD_HIDDEN double shard_seconds(void);
/* Adds d to a counter of seconds other threads add to and read (queue.c). */
SHARD_HIDDEN void shard_add_seconds(_Atomic double *counter, double d);

/* The CPU quota (cores, fractional) of the cgroup /proc/self/cgroup-style file proc_cgroup
 * names under the cgroup mount root, the smallest on the way up; 0 when none (cpus.c). */
SHARD_HIDDEN double shard_cpu_quota(const char *proc_cgroup, const char *root);

/* shard_decode_transform with the thread's scratch buffers. */
struct ShardTransform;
/* The ShardRemote a plan reads remote inputs through, made when first needed (pack.c);
 * NULL when out of memory (err says so). Thread-safe. */
struct ShardPackPlan;
struct ShardRemote;
SHARD_HIDDEN struct ShardRemote *shard_pack_plan_remote(struct ShardPackPlan *p, char *err);
/* Remote inputs a plan requests at once (ShardPackSettings.inflight, clamped). */
SHARD_HIDDEN unsigned shard_pack_plan_inflight(const struct ShardPackPlan *p);

/* A JPEG re-encoded smaller (shrink.c): data malloc'd, NULL when left as it was. */
typedef struct ShardShrunk {
    unsigned char *data;
    size_t size;
    int width, height;         /* the original's */
    int out_width, out_height; /* the new one's */
} ShardShrunk;
/* A JPEG whose longer side exceeds max_side re-encoded with that longer side at quality;
 * anything else (another format, small enough) left alone: out->data NULL. */
SHARD_HIDDEN int shard_jpeg_shrink(const void *data, size_t size, int max_side, int quality,
                                   ShardShrunk *out, char *msg);

SHARD_HIDDEN int shard_decode_transform_with(ShardScratch *sc, const void *data, size_t size,
                                             const struct ShardTransform *t, uint64_t seed,
                                             void *out, char *msg, size_t msgsize);

/* PIL's bilinear resize with the vertical pass first: within 1 of shard_resize_rgb, faster
 * when shrinking. Interleaved RGB in; out interleaved, or with planar three planes R, G, B
 * (mirrored when flip). */
SHARD_HIDDEN int shard_resize_fast(ShardScratch *sc, const unsigned char *in, int w, int h,
                                   double x0, double y0, double bw, double bh, unsigned char *out,
                                   int out_w, int out_h, int planar, int flip);
/* The SIMD path shard_resize_fast takes with this scratch: "none", "avx2", "avx512" or
 * "vnni" (the best the CPU has, capped by LIBSHARD_SIMD when the scratch is first used). */
SHARD_HIDDEN const char *shard_resize_path(ShardScratch *sc);

#endif /* SHARD_INTERNAL_H */
