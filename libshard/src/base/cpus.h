/*
 * The CPUs this process may use (shard/common.h: shard_cpus_available).
 */
#ifndef SHARD_BASE_CPUS_H
#define SHARD_BASE_CPUS_H

#include "base/attr.h"

/* The CPU quota (cores, fractional) of the cgroup /proc/self/cgroup-style file proc_cgroup
 * names under the cgroup mount root, the smallest on the way up; 0 when none. */
SHARD_HIDDEN double shard_cpu_quota(const char *proc_cgroup, const char *root);

#endif /* SHARD_BASE_CPUS_H */
