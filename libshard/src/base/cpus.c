/*
 * The CPUs this process may use (common.h: shard_cpus_available): what decode threads default
 * to. A container or taskset gives a process fewer CPUs than the machine has, and a thread
 * per machine core then only adds switching: the affinity mask counts, and a cgroup CPU
 * quota (cgroup v2 cpu.max; v1 cpu.cfs_quota_us over cpu.cfs_period_us), on the process's
 * cgroup or any ancestor, caps it, rounded up.
 */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cpus.h"
#include "shard/common.h"



/* q / p from a file holding "Q P" (v2 cpu.max: "max P" when unlimited), or from two files
 * (v1); 0 when there is no quota or no such file. */
static double read_quota(const char *dir, int v2)
{
    char path[4160]; /* dir (at most 4096) and a file name */
    double q = 0, p = 0;
    if (v2) {
        snprintf(path, sizeof path, "%s/cpu.max", dir);
        FILE *f = fopen(path, "r");
        if (!f)
            return 0;
        char qs[32] = "";
        int ok = fscanf(f, "%31s %lf", qs, &p) == 2 && strcmp(qs, "max");
        fclose(f);
        q = ok ? atof(qs) : 0;
    } else {
        snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
        FILE *f = fopen(path, "r");
        if (!f)
            return 0;
        int ok = fscanf(f, "%lf", &q) == 1;
        fclose(f);
        snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
        f = fopen(path, "r");
        if (!f)
            return 0;
        ok = ok && fscanf(f, "%lf", &p) == 1;
        fclose(f);
        if (!ok)
            return 0;
    }
    return q > 0 && p > 0 ? q / p : 0;
}

/* The smallest quota on dir and its ancestors down to root; 0 when none. */
static double smallest_quota(const char *root, const char *cgroup, int v2)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s%s", root, strcmp(cgroup, "/") ? cgroup : "");
    double best = 0;
    size_t rootlen = strlen(root);
    for (;;) {
        double q = read_quota(dir, v2);
        if (q > 0 && (best == 0 || q < best))
            best = q;
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < rootlen)
            break;
        *slash = 0;
    }
    return best;
}

double shard_cpu_quota(const char *proc_cgroup, const char *root)
{
    FILE *f = fopen(proc_cgroup, "r");
    if (!f)
        return 0;
    char line[4096], dir[4096];
    double best = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = 0;
        const char *controllers = c1 + 1, *path = c2 + 1;
        double q = 0;
        if (!strcmp(line, "0") && !*controllers) { /* v2 */
            q = smallest_quota(root, path, 1);
        } else {
            int cpu = 0; /* "cpu" among the comma-separated controllers */
            char list[256];
            snprintf(list, sizeof list, "%s", controllers);
            for (char *save, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
                cpu |= !strcmp(t, "cpu");
            if (!cpu)
                continue;
            /* mounted as cpu,cpuacct or cpu; inside a container the path may be the root */
            const char *mounts[] = {"cpu,cpuacct", "cpu", "cpuacct,cpu"};
            for (int m = 0; m < 3 && q == 0; m++) {
                snprintf(dir, sizeof dir, "%s/%s", root, mounts[m]);
                q = smallest_quota(dir, path, 0);
                if (q == 0)
                    q = read_quota(dir, 0);
            }
        }
        if (q > 0 && (best == 0 || q < best))
            best = q;
    }
    fclose(f);
    return best;
}

int shard_cpus_available(void)
{
    int n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        n = CPU_COUNT(&set);
    double q = shard_cpu_quota("/proc/self/cgroup", "/sys/fs/cgroup");
    if (q > 0 && ceil(q) < n)
        n = (int)ceil(q);
    return n > 0 ? n : 1;
}

uint64_t shard_memory_total(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t total = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : (uint64_t)8 << 30;
    /* cgroup v2's memory.max of this process's group, where it is a number */
    FILE *f = fopen("/sys/fs/cgroup/memory.max", "r");
    unsigned long long max;
    if (f && fscanf(f, "%llu", &max) == 1 && max && max < total)
        total = max;
    if (f)
        fclose(f);
    return total;
}
