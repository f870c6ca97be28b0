/*
 * libshard — common definitions: export macro, error codes, error reports and the
 * allocator hook. Every other public header includes this one.
 */
#ifndef SHARD_COMMON_H
#define SHARD_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define SHARD_API __declspec(dllexport)
#elif defined(__GNUC__)
#define SHARD_API __attribute__((visibility("default")))
#else
#define SHARD_API
#endif

/**
 * Return codes. Functions return 0 on success or one of these negative values.
 * shard_strerror() names a code; the handle's error function (or a ShardError filled
 * by a function that has no handle yet) says what failed and where: the file or URL,
 * the byte offset and the member.
 */
enum {
    SHARD_OK = 0,
    SHARD_ERR_INVALID = -1,     /**< a bad argument or setting */
    SHARD_ERR_NOMEM = -2,       /**< out of memory */
    SHARD_ERR_IO = -3,          /**< a read, write, open or rename failed */
    SHARD_ERR_NOSPACE = -4,     /**< the disk (or quota) is full */
    SHARD_ERR_FORMAT = -5,      /**< malformed input: tar, zstd, index, manifest, list */
    SHARD_ERR_NOT_FOUND = -6,   /**< a file, shard, member or key does not exist */
    SHARD_ERR_CHECKSUM = -7,    /**< content does not match its recorded checksum */
    SHARD_ERR_DECODE = -8,      /**< an image does not decode */
    SHARD_ERR_UNSUPPORTED = -9, /**< a feature this build or this input lacks */
    SHARD_ERR_NOCUDA = -10,     /**< built without CUDA, or no CUDA device */
    SHARD_ERR_STATE = -11,      /**< a call out of order, or on a handle that failed */
    SHARD_EOS = -100,           /**< end of stream: not an error */
    SHARD_AGAIN = -101,         /**< nothing yet within the wait asked for: call again */
};

/** Longest message a ShardError holds, including the terminating NUL. */
#define SHARD_ERROR_MAX 1024

/** A sample count not known (a shard with no index or manifest entry, a plan's "to the
 *  end of the shard"). */
#define SHARD_COUNT_UNKNOWN UINT64_MAX

/**
 * An error report for calls that fail before a handle exists (open, read).
 * Callers own it, usually on the stack; pass NULL when the message is not wanted.
 */
typedef struct ShardError {
    int code;                      /**< the return code, 0 when nothing failed */
    char message[SHARD_ERROR_MAX]; /**< what and where, NUL-terminated */
} ShardError;

/**
 * @return a static, human-readable name for a return code (never NULL).
 */
SHARD_API const char *shard_strerror(int code);

/**
 * A URL as libshard shows it in every message, log line, statistic and tool output: without
 * a user and password ("https://user:pw@host/" shows "https://host/") and with its query, a
 * signed URL's signature or a token, replaced by "?...". Samples' own __url__ keep the URL
 * as given. Text that is not a URL is copied as it is.
 * @param out receives the NUL-terminated URL, cut to cap bytes (after the redaction)
 */
SHARD_API void shard_url_display(const char *url, char *out, size_t cap);

/**
 * Memory hook for a batch's image and label buffers, what a device copy reads
 * (ShardLoaderSettings.allocator). CUDA pinned host memory is one implementation; the
 * default (shard_default_allocator) gives large buffers in 2 MB pages. Keys, indices and raw
 * fields, which stay on the host and grow with the samples, always take the default.
 *
 * Threads: alloc is called on the thread that opens the loader (once per batch buffer);
 * free on the thread that frees the loader. Calls can overlap, so implementations must be
 * thread-safe; neither is ever called on a decode thread or per batch.
 */
typedef struct ShardAllocator {
    void *cookie; /**< passed back to both functions; borrowed, must outlive the user */
    /** @return size bytes aligned to align (a power of two), or NULL on failure */
    void *(*alloc)(void *cookie, size_t size, size_t align);
    /** Releases a block from alloc, of the size asked for; ptr may be NULL. */
    void (*free)(void *cookie, void *ptr, size_t size);
} ShardAllocator;

/**
 * @return the allocator used when none is given (static, never NULL): aligned malloc, and
 *         for blocks of 2 MB and more, 2 MB alignment with transparent huge pages asked for
 *         (madvise), so a batch buffer costs a few page faults instead of thousands
 */
SHARD_API const ShardAllocator *shard_default_allocator(void);

/**
 * @return the CPUs this process may use, at least 1: its affinity mask (taskset, cpusets),
 *         capped by a cgroup CPU quota (a container's --cpus; cgroup v2 or v1), rounded up.
 *         What decode threads default to.
 */
SHARD_API int shard_cpus_available(void);

/** @return the library version as "MAJOR.MINOR.PATCH" (static string). */
SHARD_API const char *shard_version(void);

#ifdef __cplusplus
}
#endif

#endif /* SHARD_COMMON_H */
