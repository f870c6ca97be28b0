/*
 * libshard — the pack plan: which input file becomes which sample (key, fields) in which
 * numbered shard, computed once from the inputs' names and sizes and the options, and the
 * writing of any one shard of it. shardpack, a Python packer and the workers of a cluster
 * running the same plan write byte-identical shards, indexes and manifests, whatever the
 * number of jobs or machines.
 *
 * The plan (formats/shard.md, section 1): inputs in the order given (shardpack gives them
 * sorted by relative path); keys derived from the relative paths (shard_key_from_path), a
 * clash getting the smallest free "_N"; with a shuffle seed, the order shuffled across the
 * whole set; then shards cut by the writer's rule (shard_writer_rotates) on the exact sizes
 * of the samples; `part` of `nparts` is a contiguous share of those shards under their own
 * numbers. Each sample has the image as it is, or resized (max_side) (field: its lower-cased extension), "cls"
 * (the label in decimal, when labelled) and "json" (path, label, class and extra fields).
 *
 * A plan is built by one thread; once built it is read-only, and any number of threads
 * may write its shards at once (each shard by one thread).
 */
#ifndef SHARD_PACK_H
#define SHARD_PACK_H

#include "common.h"
#include "manifest.h"
#include "remote.h"
#include "writer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ShardPackSettings {
    const char *pattern;          /**< output shards ("out/train-%06d.tar" or ".tar.zst"); copied;
                                       required */
    uint64_t maxcount;            /**< samples per shard, 0 for no limit (default 100000) */
    uint64_t maxsize;             /**< bytes per shard (shard_writer_sample_size), 0 for no
                                       limit (default 3e9) */
    ShardCompression compression; /**< default SHARD_COMPRESSION_AUTO (from the pattern) */
    int level;                    /**< zstd level (default 3) */
    size_t frame_size;            /**< uncompressed bytes per zstd frame (default 4 MiB) */
    int shuffle;                  /**< shuffle the inputs across the set with shuffle_seed
                                       before cutting shards (default 0) */
    uint64_t shuffle_seed;
    uint64_t part, nparts;        /**< pack only part `part` (0-based) of nparts; nparts 0
                                       (default): the whole plan, unsplit */
    int verify;                   /**< decode every JPEG fully; a corrupt one is bad input
                                       (default 0: image signatures are checked) */
    int64_t mtime;                /**< mtime of every member (default 0) */
    int checksums;                /**< digests of each shard: SHARD_DIGEST_* bits (writer.h),
                                       0 for none (default SHARD_DIGEST_SHA256) */
    int sync;                     /**< fsync before renaming into place (default 1) */
    /** Resize while packing: a JPEG whose longer side exceeds max_side pixels is re-encoded
     *  with that longer side (PIL's antialiased bilinear filter, libjpeg-turbo at quality);
     *  its .json gets original_width and original_height. Other formats and smaller JPEGs
     *  stay as they are. 0 (default): every file as it is. Shards are still cut on the
     *  inputs' sizes as listed, so maxsize bounds them from above. */
    uint32_t max_side;
    int quality;                  /**< JPEG quality 1..100 for max_side (default 95) */
    /** Where inputs named by http://, https://, gs:// and s3:// URLs (list files) are read
     *  through; NULL (default): the plan makes one with the default settings when it meets
     *  such an input. Borrowed: kept alive by the plan while it lives. */
    ShardRemote *remote;
    /** Remote inputs requested at once: while a shard is written, and while a scan asks
     *  for their sizes (default 16) */
    uint32_t inflight;
    /** Resume an interrupted run of this same plan (shard_pack_prepare): the shards its
     *  record says it finished, and the store still holds at their sizes with their
     *  indexes, are kept (shard_pack_kept) and only the others written; the result is what
     *  an uninterrupted run writes. A record of another plan (other inputs or options) is
     *  refused, naming what changed; with no record, everything is packed. 0 (default): an
     *  earlier set at this pattern is replaced, nothing of it kept. */
    int resume;
    /** Pack each distinct image once: an input whose bytes equal an earlier input's (in
     *  input order, before the shuffle) is left out when the plan is built, and listed
     *  (shard_pack_plan_duplicate). Local inputs only (default 0). */
    int dedup;
    /** Zero: room for settings added later without changing the struct's size. */
    unsigned char reserved[36];
} ShardPackSettings;

/** One input file. Strings are borrowed for the call and copied. */
typedef struct ShardPackInput {
    const char *path;       /**< where to read the file */
    const char *rel;        /**< its name in the dataset (a relative path): the key is derived
                                 from it and the sample's .json records it */
    const char *field;      /**< the image's field name (default NULL: rel's extension,
                                 lower-cased) */
    int64_t label;          /**< class index, -1 for none */
    const char *class_name; /**< NULL for none */
    const char *extra_json; /**< a JSON object's text: more fields for the .json; NULL for none */
    uint64_t size;          /**< bytes of the file, as found when listing the inputs */
} ShardPackInput;

/** Why an input is bad (ShardPackCallbacks.on_bad). Reasons may be added: a caller that
 *  names them by table keeps a name for one it does not know. */
typedef enum ShardPackBad {
    SHARD_PACK_UNREADABLE = 1, /**< it cannot be opened or read */
    SHARD_PACK_CHANGED = 2,    /**< its size changed since it was listed */
    SHARD_PACK_NOT_IMAGE = 3,  /**< no image signature */
    SHARD_PACK_CORRUPT = 4,    /**< a JPEG that does not decode cleanly (verify) */
    SHARD_PACK_BAD_NAME = 5,   /**< its name is not valid UTF-8 (found by a scan) */
    SHARD_PACK_EMPTY = 6,      /**< a zero-byte file (found by a scan) */
    /** an image the loader does not decode (GIF, BMP, TIFF, PNM; what begins with the
     *  format's name as shard_image_format gives it), or a JPEG, PNG or WebP whose header
     *  does not parse (what begins with "broken"; its size is "-" in the columns): on_bad
     *  returns 1 to leave it out, 0 to pack it as it is (it never fails the shard) */
    SHARD_PACK_UNDECODED = 7,
    /** a class folder with no images (found by a folder scan; torchvision's ImageFolder
     *  refuses one): on_bad returns 1 to keep it as a class with no samples, 0 to fail */
    SHARD_PACK_EMPTY_CLASS = 8,
    /** a file a folder scan leaves out, having no image extension: told so that it can be
     *  named; on_bad's return is not used (it is counted in `ignored` either way) */
    SHARD_PACK_IGNORED = 9,
} ShardPackBad;

/** What a scan (shard_pack_plan_scan) reports beside the inputs it adds. */
typedef struct ShardPackScanCallbacks {
    /** A bad input (path and what borrowed for the call): return 1 to leave it out, 0 to
     *  fail the scan. The scan goes on either way, so that every bad input is named once;
     *  a failed scan's error is the first not left out. NULL: fail. */
    int (*on_bad)(void *cookie, const char *path, ShardPackBad reason, const char *what);
    void *cookie;
} ShardPackScanCallbacks;

/** What a shard's writing reports, on the thread that writes it. */
typedef struct ShardPackCallbacks {
    /** A bad input: return 1 to leave it out (the shard goes on), 0 to fail the shard with
     *  `what` in the error. NULL: fail. input is the plan's index. */
    int (*on_bad)(void *cookie, size_t input, ShardPackBad reason, const char *what);
    /** An input was written (bytes: its size); return nonzero to stop the shard (it is then
     *  discarded, SHARD_ERR_STATE). NULL: nothing. */
    int (*on_written)(void *cookie, size_t input, uint64_t bytes);
    void *cookie;
    /** A JPEG re-encoded for max_side, before on_written: from bytes_in to bytes_out.
     *  NULL: nothing. (Zero-initialise the struct: fields may be added.) */
    void (*on_resized)(void *cookie, size_t input, uint64_t bytes_in, uint64_t bytes_out);
} ShardPackCallbacks;

typedef struct ShardPackPlan ShardPackPlan;

/** Fills s with the defaults written beside each field. */
SHARD_API void shard_pack_default_settings(ShardPackSettings *s);

/**
 * Checks the settings (the pattern, the part, the zstd options) and creates an empty plan.
 * @param out receives the plan, owned by the caller (shard_pack_plan_free)
 * @param err optional; which setting is wrong
 */
SHARD_API int shard_pack_plan_new(ShardPackPlan **out, const ShardPackSettings *s, ShardError *err);

/** Appends an input (copied). @return 0, SHARD_ERR_INVALID after build, SHARD_ERR_NOMEM */
SHARD_API int shard_pack_plan_add(ShardPackPlan *p, const ShardPackInput *in);

/** Sets the class names, in label order, for the manifest (copied). */
SHARD_API int shard_pack_plan_set_classes(ShardPackPlan *p, const char *const *names, size_t n);

/**
 * Adds the inputs found at src, in the order shardpack packs them, and sets the class names;
 * shardpack, libshard.distributed and any other packer scan alike, so that their plans agree.
 *  - a folder in ImageFolder layout: class = first-level folder, labelled 0.. in byte-wise
 *    order of the names; files below it (links followed, hidden entries left out) with an
 *    image extension (jpg jpeg png ppm bmp pgm tif tiff webp, any case), in byte-wise order of
 *    their relative paths; other files are ignored and counted;
 *  - with list set, a list file: TSV whose header row names a "path" column (and "label",
 *    and any others, which go into the sample's .json), or JSONL objects with "path" (and
 *    "label", and any others); relative paths resolve against the list's folder; string
 *    labels are class names, numbered in byte-wise order.
 * Bad inputs (a name that is not UTF-8, unreadable, zero-byte, no image extension in a list)
 * go to cb. The inputs' sizes are taken now: a file whose size changes before its shard is
 * written is bad input then (SHARD_PACK_CHANGED).
 * @param cb optional; NULL fails the scan at any bad input (after naming none)
 * @param ignored optional; receives the number of files ignored for their extension
 * @param err optional; why: src unreadable or not in the layout, a malformed list line
 *        (named by file and line), the first bad input not left out, no images at all
 */
SHARD_API int shard_pack_plan_scan(ShardPackPlan *p, const char *src, int list,
                                   const ShardPackScanCallbacks *cb, uint64_t *ignored,
                                   ShardError *err);

/**
 * Builds the plan: keys, the shuffle, the shards. The plan takes no inputs after this.
 * @param err optional; an input whose path gives no valid key (named)
 */
SHARD_API int shard_pack_plan_build(ShardPackPlan *p, ShardError *err);

/** @return the inputs settings.dedup left out when the plan was built (0 without it) */
SHARD_API size_t shard_pack_plan_duplicates(const ShardPackPlan *p);

/**
 * Duplicate i (0 .. shard_pack_plan_duplicates - 1, in input order): the input left out,
 * the earlier input with the same bytes that is packed, and their SHA-256 in hex. The
 * strings are borrowed, valid while p lives.
 * @return 0, or SHARD_ERR_INVALID for i out of range
 */
SHARD_API int shard_pack_plan_duplicate(const ShardPackPlan *p, size_t i, const char **dropped,
                                        const char **kept, const char **sha256);

/**
 * Duplicate i's labels: the one the input left out had and the one the packed copy has
 * (-1: none); where they differ, the packed copy's stands.
 * @return 0, or SHARD_ERR_INVALID for i out of range
 */
SHARD_API int shard_pack_plan_duplicate_labels(const ShardPackPlan *p, size_t i,
                                               int64_t *dropped, int64_t *kept);

/** @return the number of inputs */
SHARD_API size_t shard_pack_plan_inputs(const ShardPackPlan *p);

/** @return input i in plan order (after the shuffle; strings borrowed from the plan) */
SHARD_API const ShardPackInput *shard_pack_plan_input(const ShardPackPlan *p, size_t i);

/** @return input i's sample key (borrowed) */
SHARD_API const char *shard_pack_plan_key(const ShardPackPlan *p, size_t i);

/** @return the number of shards of the whole plan (all parts) */
SHARD_API size_t shard_pack_plan_shards(const ShardPackPlan *p);

/** The inputs [*first, *end) of shard j (j < shard_pack_plan_shards). */
SHARD_API void shard_pack_plan_shard(const ShardPackPlan *p, size_t j, size_t *first, size_t *end);

/** The shards [*lo, *hi) of this part (settings.part of nparts; all without parts). */
SHARD_API void shard_pack_plan_part(const ShardPackPlan *p, size_t *lo, size_t *hi);

/**
 * Writes shard j (its index beside it) from its inputs, read from disk: a complete shard
 * under its final name, or nothing; then records it as finished in the pack's record
 * (shard_pack_prepare). Thread-safe for distinct shards.
 * @param cb optional; bad inputs and progress
 * @param info receives what the manifest needs: info->url is malloc'd, owned by the caller;
 *        url NULL when every input of the shard was left out (no shard written)
 * @param err optional; what failed: a bad input (named), the disk
 */
SHARD_API int shard_pack_write_shard(const ShardPackPlan *p, size_t j, const ShardPackCallbacks *cb,
                                     ShardFileInfo *info, ShardError *err);

/**
 * @return the manifest path for the settings, malloc'd, owned by the caller: the pattern's
 *         stem ("out/train-%06d.tar.zst" -> "out/train.json"), and with nparts set
 *         "out/train.part-I-of-N.json"; NULL when out of memory
 */
SHARD_API char *shard_pack_manifest_path(const ShardPackSettings *s);

/**
 * A new manifest for the plan, as shardpack writes it: named after manifest_path's stem,
 * with the class names and the packing options; add the written shards' infos in shard
 * order, then write it to manifest_path.
 * @param out receives the manifest, owned by the caller (shard_manifest_free)
 */
SHARD_API int shard_pack_manifest(ShardManifest **out, const ShardPackPlan *p,
                                  const char *manifest_path);

/**
 * Writes m to manifest_path as shard_manifest_write does, into a bucket through the plan's
 * remote (the settings' remote, with its credentials and retries).
 */
SHARD_API int shard_pack_manifest_write(const ShardPackPlan *p, const ShardManifest *m,
                                        const char *manifest_path, ShardError *err);

/**
 * Makes the output safe to write this plan's part into, before any shard: takes the
 * output set's lock, held by the plan until it is freed (an flock on D/.STEM.lock beside
 * the pattern: a whole run holds it alone, the runs of one part set share it, each part
 * also holding D/.STEM.part-I-of-N.lock alone; outputs in a bucket are not locked: one
 * pack at a time there is the caller's to keep); removes the manifest at manifest_path (it
 * is written last, so a run that fails or is killed leaves none naming shards it did not
 * finish, nor an earlier run's) and the temporary files that killed runs left for the
 * shards this part writes.
 * Then the pack's record (D/.STEM.pack/, in a folder or a bucket): with settings.resume
 * and a record of this plan, the shards it lists as finished are kept (shard_pack_kept).
 * Otherwise the earlier set is replaced: its record, manifests (the set's and its parts'
 * for a whole run; the set's and this part's for a part) and the shards and indexes the
 * pattern numbers (all of them for a whole run, this part's for a part) are removed, so
 * that nothing of it is read with the new set, and this plan's record is written.
 * Shards this plan writes from then on are recorded as finished (a marker in the record
 * after each), for a resume; other processes writing shards of the same plan (a cluster's
 * tasks) take no lock and record theirs after shard_pack_attach.
 * @param err optional; SHARD_ERR_STATE when another run holds the lock (err names it and
 *        what its holder wrote there: pid, host, start), or when a resume finds the record
 *        of another plan (err names what changed); a file that cannot be removed
 */
SHARD_API int shard_pack_prepare(ShardPackPlan *p, const char *manifest_path, ShardError *err);

/**
 * Makes p, built in another process from the same inputs and settings as the plan
 * shard_pack_prepare prepared (a cluster's task), write shards for that run: each shard
 * shard_pack_write_shard finishes is recorded in the run's record, so that a resume keeps
 * it. Takes no lock and removes nothing.
 */
SHARD_API void shard_pack_attach(ShardPackPlan *p);

/**
 * After shard_pack_prepare with settings.resume: whether shard j was kept from the
 * interrupted run, and its manifest entry.
 * @param info receives the entry when kept: info->url malloc'd, owned by the caller
 * @return 1 when kept, 0 when it is to be written, SHARD_ERR_NOMEM
 */
SHARD_API int shard_pack_kept(const ShardPackPlan *p, size_t j, ShardFileInfo *info);

/** @return 1 when shard_pack_prepare found the record of an earlier run of this plan to
 *  resume, else 0 */
SHARD_API int shard_pack_resumed(const ShardPackPlan *p);

/** @return 1 when shard_pack_prepare, resuming, found the set (or part) complete: its record
 *  says a run of this plan finished it and its manifest is the one that run wrote; every
 *  shard is kept and shard_pack_manifest_write writes nothing. Else 0 */
SHARD_API int shard_pack_complete(const ShardPackPlan *p);

/** @return the files of an earlier set (manifests, shards, indexes) shard_pack_prepare
 *  removed to replace it */
SHARD_API size_t shard_pack_replaced(const ShardPackPlan *p);

/**
 * After a whole run (no parts): shards and indexes beside this run's that the pattern
 * numbers past its last shard, left by an earlier, larger run into the same folder. Nothing
 * is removed: fn is called with each path (borrowed), for the caller to name or remove.
 * @return the number found
 */
SHARD_API size_t shard_pack_leftovers(const ShardPackPlan *p,
                                      void (*fn)(void *cookie, const char *path), void *cookie);

/** Frees a plan and sets *p to NULL; accepts NULL. */
SHARD_API void shard_pack_plan_free(ShardPackPlan **p);

#ifdef __cplusplus
}
#endif

#endif /* SHARD_PACK_H */
