/*
 * The CPUs this process may use (shard/common.h: shard_cpus_available), and the machine's
 * memory.
 */
#ifndef SHARD_BASE_CPUS_H
#define SHARD_BASE_CPUS_H

#include <stdint.h>

#include "base/attr.h"

/* The CPU quota (cores, fractional) of the cgroup /proc/self/cgroup-style file proc_cgroup
 * names under the cgroup mount root, the smallest on the way up; 0 when none. */
SHARD_HIDDEN double shard_cpu_quota(const char *proc_cgroup, const char *root);

/* The machine's memory in bytes (its cgroup's limit where lower); 8 GiB when it cannot be
 * told. */
SHARD_HIDDEN uint64_t shard_memory_total(void);

#endif /* SHARD_BASE_CPUS_H */
