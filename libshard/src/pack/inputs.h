/*
 * What a pack scan finds (inputs.c): its inputs, each a file or a URL with its relative
 * name, field, label and extras, and its class names; the bad inputs it met, reported
 * through the callbacks or remembered as its error. The folder walk (folder.c) and the list
 * reader (listfile.c) fill it; shard_pack_plan_scan (scan.c) hands it to the plan.
 */
#ifndef SHARD_PACK_INPUTS_H
#define SHARD_PACK_INPUTS_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "shard/common.h"
#include "shard/pack.h"

typedef struct Item {
    char *path;  /* to open */
    char *rel;   /* as the dataset names it */
    char *field; /* lower-cased extension */
    char *extra; /* JSON object text, or NULL */
    long label;
    size_t class_index; /* into Scan.classes when label >= 0 and named */
    int named;
    int remote;   /* a URL: its size is asked for after the list is read */
    int dropped;  /* a remote file found bad: not added to the plan */
    char *failed; /* why a remote file's size could not be had */
    uint64_t size;
} Item;

typedef struct Scan {
    ShardPackPlan *plan;
    const ShardPackScanCallbacks *cb;
    Item *v;
    size_t n, cap;
    char **classes;
    size_t nclasses;
    uint64_t ignored;
    int nomem;
    int failed;               /* a bad input was not left out */
    char first[SHARD_ERROR_MAX]; /* the first such, for the error */
    int first_code;
} Scan;

/* The image extension of a file name (as it is written), or NULL when it has none of the
 * extensions packed: jpg jpeg png ppm bmp pgm tif tiff webp. */
SHARD_HIDDEN const char *shard_scan_image_ext(const char *name);
/* A copy of s, or NULL with c->nomem set. */
SHARD_HIDDEN char *shard_scan_dup(Scan *c, const char *s);
/* a/b (b alone when a is ""), malloc'd, or NULL with c->nomem set. */
SHARD_HIDDEN char *shard_scan_join(Scan *c, const char *a, const char *b);
/* A bad input: left out when the callback says so, else remembered as the scan's error. */
SHARD_HIDDEN void shard_scan_bad(Scan *c, const char *path, ShardPackBad reason, const char *what);
/* Tells the scan's callback of path (reason, what) without judging it: its answer is not
 * used (a file left out for its extension). */
SHARD_HIDDEN void shard_scan_note(Scan *c, const char *path, ShardPackBad reason,
                                  const char *what);
/* Adds the file at path (a URL: its size asked for later) as an input named rel, of field
 * ext, with label, class_index (-1: none named) and extra (JSON object text, or NULL). */
SHARD_HIDDEN void shard_scan_add(Scan *c, const char *path, const char *rel, const char *ext,
                                 long label, long class_index, const char *extra);
SHARD_HIDDEN void shard_scan_free(Scan *c);
/* qsort's comparison of two names (char *), byte-wise. */
SHARD_HIDDEN int shard_scan_name_cmp(const void *a, const void *b);

#endif /* SHARD_PACK_INPUTS_H */
