/*
 * libshard — shard lists: what a user writes to name shards (a path or URL, a brace pattern
 * such as "train-{000000..000099}.tar", a manifest ".json", "pipe:COMMAND"), expanded into
 * one list of shards that carry what is known of each (sample count, size, checksums), so
 * nothing downstream reads a manifest again.
 *
 * A ShardList is immutable once expanded: any number of threads may read it.
 */
#ifndef SHARD_LIST_H
#define SHARD_LIST_H

#include "common.h"
#include "remote.h"
#include "file.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A manifest (manifest.h, where it is made and read); here only the list's own. */
typedef struct ShardManifest ShardManifest;

/** A sample count that is not known (no manifest, no index). */
/** One shard of a list. Everything is owned by the list. */
typedef struct ShardListEntry {
    const char *url;           /**< to open: a path, a URL or "pipe:COMMAND" */
    uint64_t nsamples;         /**< samples in the shard, SHARD_COUNT_UNKNOWN if not known */
    const ShardFileInfo *info; /**< what its manifest says (size, checksums), or NULL */
    size_t spec;               /**< which of the specs it came from (0-based) */
    /** The index to read the shard through: one libshard made and keeps in its cache
     *  (ShardListSettings.build_indexes), or NULL for the .idx beside the shard, if any. */
    const char *index;
    /** Its image sizes (formats/columns.md), with ShardListSettings.columns: the .cols
     *  beside the shard, or those kept in the index cache; NULL for none. */
    const char *columns;
} ShardListEntry;

/** ShardListSettings.build_indexes */
enum { SHARD_INDEXES_FOR_COUNTS = 1, SHARD_INDEXES_FOR_SEEKING = 2, SHARD_INDEXES_WHERE_CHEAP = 3 };

typedef struct ShardListSettings {
    /** Read the sample count of shards not in a manifest from the header line of their
     *  index (x.tar -> x.idx), where they have one (default 1) */
    int counts;
    /** Where remote specs, manifests and indexes are read through (a prefix gs://B/P/ or
     *  s3://B/P/ lists the shards under it); NULL: one made for the call. Borrowed. */
    ShardRemote *remote;
    /** Let a manifest's shard list hold "pipe:COMMAND" entries, which run commands
     *  (default 0: a manifest, which may come from anywhere, runs nothing; a pipe: spec
     *  given directly is always allowed) */
    int manifest_commands;
    /** Let a manifest read from a remote URL (http, https, gs, s3) list local paths and
     *  file:// URLs (default 0: a remote manifest reaches remote shards only, so that it
     *  cannot make a local file training data) */
    int manifest_local;
    /** Make the indexes shards lack (a plain tar, as GNU tar or WebDataset's writer leave
     *  it): SHARD_INDEXES_FOR_COUNTS for each shard with no count from a manifest or a .idx
     *  beside it, SHARD_INDEXES_FOR_SEEKING for each shard with no .idx beside it (a
     *  manifest's count is then checked against it), SHARD_INDEXES_WHERE_CHEAP as
     *  FOR_COUNTS for uncompressed tars, local or remote (a walk over their headers). One
     *  pass over the shard's headers (a
     *  local file seeks over the data; a remote one streams once; a .tar.gz is inflated
     *  whole), kept in index_cache and found there again while the shard's size and
     *  version (mtime and inode, ETag, generation) are unchanged; never written beside the
     *  shard (shardcat index does that). Default 0: none made. */
    int build_indexes;
    /** The folder of the indexes libshard makes; NULL: the remote's cache_dir/index, else
     *  $XDG_CACHE_HOME/libshard/index, else ~/.cache/libshard/index. Borrowed. */
    const char *index_cache;
    /** Threads that count and make indexes (0: as many as useful, up to 16) */
    unsigned threads;
    /** Show the progress of making indexes on standard error when it is a terminal */
    int progress;
    /** Find each shard's image sizes, for planning batches by shape (ShardListEntry.columns):
     *  the .cols beside it, else, for the shards build_indexes makes indexes for, those kept
     *  in index_cache, made there from the shard's index and each image's header (a
     *  compressed shard read whole), while the shard is unchanged (default 0) */
    unsigned char columns;
    /** Zero: room for settings added later without changing the struct's size. */
    unsigned char reserved[19];
} ShardListSettings;

typedef struct ShardList ShardList;

/** Fills s with the defaults written beside each field. */
SHARD_API void shard_list_default_settings(ShardListSettings *s);

/**
 * Expands specs, in order, into one list: a manifest (a spec ending in ".json") gives its
 * shards with its counts, sizes and checksums (relative urls resolved against the
 * manifest's own location); a brace pattern its expansions ("{000..123}" keeps the zero
 * padding, "{a,b}" alternatives, several braces); anything else is one shard as written.
 * @param specs nspecs strings, borrowed for the call
 * @param s settings, NULL for the defaults
 * @param out receives the list, owned by the caller (shard_list_free); NULL on failure
 * @param err optional; a malformed pattern, an unreadable manifest
 */
SHARD_API int shard_list_expand(ShardList **out, const char *const *specs, size_t nspecs,
                                const ShardListSettings *s, ShardError *err);

/** @return the number of shards */
SHARD_API size_t shard_list_count(const ShardList *l);

/** @return shard i (borrowed, valid until the list is freed), NULL past the end */
SHARD_API const ShardListEntry *shard_list_entry(const ShardList *l, size_t i);

/** The manifest the spec numbered spec (0-based) named, as read (its classes, options);
 *  borrowed, valid until the list is freed; NULL when that spec named no manifest. */
SHARD_API const ShardManifest *shard_list_manifest(const ShardList *l, size_t spec);

/**
 * The list written down as a manifest (manifest.h): every shard as the list names it (a
 * folder's or prefix's listing pinned where its store pins: the Hub's commit) with its
 * count and what its manifest said of it, so that a job reading the manifest lists nothing
 * and reads no index for counts.
 * @param name the manifest's name (copied)
 * @param out receives the manifest, owned by the caller (shard_manifest_free)
 * @param err optional; a shard without a count, named
 */
SHARD_API int shard_list_manifest_of(const ShardList *l, const char *name, ShardManifest **out,
                                     ShardError *err);

/** The indexes the expansion made (build_indexes), and those it found in the cache. */
SHARD_API void shard_list_index_counts(const ShardList *l, uint64_t *built, uint64_t *cached);

/** Frees a list and sets *l to NULL; accepts NULL. */
SHARD_API void shard_list_free(ShardList **l);

/** A view of a list: the samples of each shard a file of keys chooses (as
 *  ShardReaderSettings.keys reads them), found in the shards' indexes. */
typedef struct ShardView ShardView;

/**
 * Finds the samples of l's shards whose keys the file at keys lists (one a line), in each
 * shard's index (the one the list names, else the .idx beside it), several shards at once.
 * @param out receives the view, owned by the caller (shard_view_free); NULL on failure
 * @param l the list, borrowed while the view is made
 * @param remote where remote indexes are read through; borrowed
 * @param err optional; the key file unreadable, a shard without an index naming its samples
 */
SHARD_API int shard_view_new(ShardView **out, const ShardList *l, const char *keys,
                             ShardRemote *remote, ShardError *err);
/** @return the samples of shard i chosen */
SHARD_API uint64_t shard_view_count(const ShardView *v, size_t i);
/** @return the sample number in shard i of its j-th chosen sample (j < shard_view_count),
 *  in the shard's order */
SHARD_API uint64_t shard_view_sample(const ShardView *v, size_t i, uint64_t j);
/** The keys the file gave (each once), and those that chose no sample. */
SHARD_API void shard_view_keys(const ShardView *v, uint64_t *given, uint64_t *missing);
/** Frees a view and sets *v to NULL; accepts NULL. */
SHARD_API void shard_view_free(ShardView **v);

/**
 * Expands a shard list: brace patterns ("train-{000000..000099}.tar", "{a,b}", several
 * braces, zero padding kept), a manifest (a path ending in ".json", urls resolved against
 * its folder), or a plain path or URL (returned as it is).
 * @param out receives an array of *n strings, owned by the caller: shard_urls_free
 * @param err optional; a malformed pattern or unreadable manifest
 */
SHARD_API int shard_urls_expand(const char *spec, char ***out, size_t *n, ShardError *err);

/** Frees an array from shard_urls_expand; accepts NULL. */
SHARD_API void shard_urls_free(char **urls, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* SHARD_LIST_H */
