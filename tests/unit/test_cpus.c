/* The CPUs a process may use: its affinity mask (set here for real, as taskset does), and
 * cgroup CPU quotas read from cgroup trees laid out as the kernel mounts them (v2: cpu.max
 * on the process's cgroup and its ancestors; v1: cpu.cfs_quota_us / cpu.cfs_period_us under
 * the cpu controller's mount), the smallest one winning. */
#include <criterion/criterion.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <shard/shard.h>

#include "base/cpus.h"
#include "testutil.h"

static char *dir;
static void setup(void) { dir = tu_mkdtemp(); }
static void teardown(void)
{
    tu_rmtree(dir);
    free(dir);
}
TestSuite(cpus, .init = setup, .fini = teardown);

static void put(const char *rel, const char *text)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    for (char *p = path + strlen(dir) + 1; (p = strchr(p, '/')); p++) {
        *p = 0;
        mkdir(path, 0755);
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    cr_assert(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

static double quota(void)
{
    char proc[4096], root[4096];
    snprintf(proc, sizeof proc, "%s/proc-cgroup", dir);
    snprintf(root, sizeof root, "%s/fs", dir);
    return shard_cpu_quota(proc, root);
}

Test(cpus, the_affinity_mask_counts)
{
    cpu_set_t was, one;
    cr_assert_eq(sched_getaffinity(0, sizeof was, &was), 0);
    int first = 0;
    while (!CPU_ISSET(first, &was))
        first++;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    cr_assert_eq(sched_setaffinity(0, sizeof one, &one), 0);
    int n = shard_cpus_available();
    sched_setaffinity(0, sizeof was, &was);
    cr_assert_eq(n, 1, "pinned to one CPU, %d available", n);
    cr_assert_geq(shard_cpus_available(), 1);
}

Test(cpus, a_cgroup_v2_quota_caps_on_the_way_up)
{
    put("proc-cgroup", "0::/kubepods/pod1/ctr\n");
    put("fs/kubepods/cpu.max", "max 100000\n");
    put("fs/kubepods/pod1/cpu.max", "250000 100000\n"); /* 2.5 CPUs */
    put("fs/kubepods/pod1/ctr/cpu.max", "max 100000\n");
    cr_assert_float_eq(quota(), 2.5, 1e-9);
    put("fs/kubepods/cpu.max", "150000 100000\n"); /* an ancestor's smaller one wins */
    cr_assert_float_eq(quota(), 1.5, 1e-9);
}

Test(cpus, no_quota_is_none)
{
    put("proc-cgroup", "0::/\n");
    put("fs/cpu.max", "max 100000\n");
    cr_assert_float_eq(quota(), 0, 1e-9);
    put("proc-cgroup", "0::/gone\n"); /* a cgroup whose files are not there */
    cr_assert_float_eq(quota(), 0, 1e-9);
}

Test(cpus, a_cgroup_v1_quota_under_the_cpu_controller)
{
    put("proc-cgroup", "4:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n1:cpuset:/\n");
    put("fs/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "50000\n");
    put("fs/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
    cr_assert_float_eq(quota(), 0.5, 1e-9);
    put("fs/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1\n"); /* unlimited */
    cr_assert_float_eq(quota(), 0, 1e-9);
}

Test(cpus, a_v1_container_sees_its_cgroup_at_the_mount_root)
{
    put("proc-cgroup", "2:cpu,cpuacct:/docker/abc\n");
    put("fs/cpu,cpuacct/cpu.cfs_quota_us", "300000\n");
    put("fs/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    cr_assert_float_eq(quota(), 3, 1e-9);
}
