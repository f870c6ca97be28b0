/*
 * shardpack's input scan: an ImageFolder tree (class = first-level folder) or a list file
 * (TSV with a header row, or JSONL) into the list of inputs the pack plan is built from,
 * in the order the plan takes them, with class names; bad inputs fail the run or are
 * skipped, named and counted (--on-error).
 */
#ifndef SHARD_TOOLS_PACKSCAN_H
#define SHARD_TOOLS_PACKSCAN_H

#include <stdatomic.h>
#include <stdint.h>
#include <stddef.h>

typedef struct Item {
    char *path;  /* to open */
    char *rel;   /* as the dataset names it: kept in the sample's .json */
    char *field; /* lower-cased extension: the image's field name */
    char *extra; /* JSON object text of extra list fields, or NULL */
    const char *class_name;
    long label; /* -1: none */
    uint64_t size;
} Item;

typedef struct Items {
    Item *v;
    size_t n, cap;
    char **classes;
    size_t nclasses;
    uint64_t ignored; /* files without an image extension */
} Items;

/* Why samples were skipped, counted for the summary. */
enum { SKIP_NAME, SKIP_EMPTY, SKIP_UNREADABLE, SKIP_NOT_IMAGE, SKIP_CORRUPT, SKIP_CHANGED, NSKIP };

typedef struct ScanCtx {
    int skip;               /* --on-error skip: bad inputs are skipped and counted */
    int quiet;              /* skipped inputs are not named on stderr */
    Items *items;           /* filled */
    atomic_ullong *skipped; /* NSKIP counters */
    int failed;
} ScanCtx;

/* Scans an ImageFolder tree: returns 0, or -1 after saying why on stderr. */
int pack_scan_folder(ScanCtx *c, const char *root);

/* Scans a list file: returns 0, or -1 after saying why on stderr. */
int pack_scan_list(ScanCtx *c, const char *file);

/* Frees what the scan found; the counts stay. */
void free_items(Items *it);

#endif /* SHARD_TOOLS_PACKSCAN_H */
