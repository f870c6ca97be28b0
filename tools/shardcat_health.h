/*
 * shardcat verify's check of a set (shardcat_health.c): each manifest among the operands
 * against its folder. Not installed.
 */
#ifndef SHARD_TOOLS_SHARDCAT_HEALTH_H
#define SHARD_TOOLS_SHARDCAT_HEALTH_H

#include <stddef.h>

#include "shardcat_walk.h"

/* For each manifest the walk's operands name: the shards it lists that are not in its
 * folder, the numbers missing among its numbered shards, and the shards of its numbering
 * in its folder that it does not list; each said on stderr, then a line per set on stdout
 * (a JSON object with --json: set, listed, missing, gaps, unlisted, ok). The number of
 * problems found (a folder that cannot be listed counts one). */
size_t shardcat_set_health(const ShardcatWalk *w);

/* A shard name's numbering: its base name with its last run of digits as '#' and their
 * count (train-#6.tar; ".repaired" left out, so a repaired shard keeps its number) into
 * tmpl, and the number. 0, or -1 for a name without digits. */
int shardcat_numbering(const char *url, char *tmpl, size_t cap, unsigned long long *num);
/* Number k under a numbering's tmpl (train-000007.tar). */
void shardcat_numbered(const char *tmpl, unsigned long long k, char *out, size_t cap);
/* The numbers missing between the n nums (sorted here), each given to fn; how many. */
size_t shardcat_gaps(unsigned long long *nums, size_t n,
                     void (*fn)(void *cookie, unsigned long long k), void *cookie);

#endif /* SHARD_TOOLS_SHARDCAT_HEALTH_H */
