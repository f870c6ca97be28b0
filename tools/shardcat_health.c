/*
 * shardcat verify on a manifest: the set as a whole (shardcat_health.h). Beside each
 * shard's own checks, the manifest's folder is listed: shards it lists that are not there,
 * numbers missing among its numbered shards (a gap a reader would never notice), and
 * shards of its numbering beside it that it does not list (an earlier or a half-finished
 * run's, which no reader of the manifest sees).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "shardcat_health.h"

int shardcat_numbering(const char *url, char *tmpl, size_t cap, unsigned long long *num)
{
    const char *slash = strrchr(url, '/');
    char base[512];
    snprintf(base, sizeof base, "%s", slash ? slash + 1 : url);
    char *rep = strstr(base, ".repaired."); /* a repaired shard keeps its number */
    if (rep)
        memmove(rep, rep + 9, strlen(rep + 9) + 1);
    const char *end = base + strlen(base);
    while (end > base && (end[-1] < '0' || end[-1] > '9'))
        end--;
    const char *start = end;
    while (start > base && start[-1] >= '0' && start[-1] <= '9')
        start--;
    if (start == end || end - start > 18)
        return -1;
    *num = strtoull(start, NULL, 10);
    int k = snprintf(tmpl, cap, "%.*s#%d%s", (int)(start - base), base, (int)(end - start), end);
    return k < 0 || (size_t)k >= cap ? -1 : 0;
}

void shardcat_numbered(const char *tmpl, unsigned long long k, char *out, size_t cap)
{
    const char *hash = strchr(tmpl, '#');
    int width = atoi(hash + 1);
    const char *rest = hash + 1 + strspn(hash + 1, "0123456789");
    snprintf(out, cap, "%.*s%0*llu%s", (int)(hash - tmpl), tmpl, width, k, rest);
}

static int by_number(const void *a, const void *b)
{
    unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}

size_t shardcat_gaps(unsigned long long *nums, size_t n,
                     void (*fn)(void *cookie, unsigned long long k), void *cookie)
{
    qsort(nums, n, sizeof *nums, by_number);
    size_t gaps = 0;
    for (size_t i = 1; i < n; i++)
        for (unsigned long long k = nums[i - 1] + 1; k < nums[i] && gaps < 100000; k++, gaps++)
            fn(cookie, k);
    return gaps;
}

static const char *base_name(const char *url)
{
    const char *s = strrchr(url, '/');
    return s ? s + 1 : url;
}

static int by_text(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int has(const char **sorted, size_t n, const char *name)
{
    return bsearch(&name, sorted, n, sizeof *sorted, by_text) != NULL;
}

static void say(const char *manifest, const char *what, const char *name)
{
    fputs("shardcat: ", stderr);
    cli_print_url(stderr, manifest);
    fprintf(stderr, ": %s: %s\n", what, name);
}

/* The folder's shards' base names (sorted), or NULL after saying why it cannot be listed. */
static const char **folder_names(const ShardcatWalk *w, const char *manifest, size_t *n,
                                 ShardList **keep)
{
    size_t cut = (size_t)(base_name(manifest) - manifest);
    char *dir = cut ? strndup(manifest, cut) : strdup("./");
    ShardListSettings s;
    shard_list_default_settings(&s);
    s.counts = 0;
    s.remote = w->remote;
    ShardError err;
    const char *spec = dir;
    *keep = NULL;
    if (!dir || shard_list_expand(keep, &spec, 1, &s, &err)) {
        fprintf(stderr, "shardcat: %s: its folder could not be listed (%s)\n", manifest,
                dir ? err.message : "out of memory");
        free(dir);
        return NULL;
    }
    free(dir);
    *n = shard_list_count(*keep);
    const char **v = malloc((*n ? *n : 1) * sizeof *v);
    for (size_t i = 0; v && i < *n; i++)
        v[i] = base_name(shard_list_entry(*keep, i)->url);
    if (v)
        qsort(v, *n, sizeof *v, by_text);
    return v;
}

typedef struct Gaps {
    const char *manifest, *tmpl;
    json_t *gaps;
} Gaps;

static void say_gap(void *cookie, unsigned long long k)
{
    Gaps *g = cookie;
    char name[600];
    shardcat_numbered(g->tmpl, k, name, sizeof name);
    say(g->manifest, "a gap in the numbering, not listed", name);
    json_array_append_new(g->gaps, cli_json_text(name));
}

static int has_number(const unsigned long long *nums, size_t n, unsigned long long k)
{
    for (size_t i = 0; i < n; i++)
        if (nums[i] == k)
            return 1;
    return 0;
}

/* The set of spec (a manifest): its problems, said; their number. */
static size_t check_set(const ShardcatWalk *w, size_t spec, json_t *report)
{
    const char *manifest = w->cli->args[spec];
    size_t nlisted = 0, count = shard_list_count(w->list), problems = 0, npresent = 0, nnums = 0;
    const char **listed = malloc((count ? count : 1) * sizeof *listed);
    unsigned long long *nums = malloc((count ? count : 1) * sizeof *nums), num;
    ShardList *folder = NULL;
    const char **present = listed && nums ? folder_names(w, manifest, &npresent, &folder) : NULL;
    if (!present) {
        free(listed);
        free(nums);
        return 1;
    }
    size_t cut = (size_t)(base_name(manifest) - manifest);
    char tmpl[512] = "", t2[512];
    int one_numbering = 1;
    json_t *missing = json_array(), *gaps = json_array(), *unlisted = json_array();
    for (size_t i = 0; i < count; i++) {
        const ShardListEntry *e = shard_list_entry(w->list, i);
        if (e->spec != spec)
            continue;
        const char *name = base_name(e->url);
        listed[nlisted++] = name;
        /* a shard beside the manifest that is not there (one elsewhere is verified alone) */
        if ((size_t)(name - e->url) == cut && !strncmp(e->url, manifest, cut) &&
            !has(present, npresent, name)) {
            say(manifest, "listed, not there", name);
            json_array_append_new(missing, cli_json_text(name));
            problems++;
        }
        if (shardcat_numbering(e->url, t2, sizeof t2, &num) == 0 &&
            (!tmpl[0] || !strcmp(tmpl, t2))) {
            snprintf(tmpl, sizeof tmpl, "%s", t2);
            nums[nnums++] = num;
        } else {
            one_numbering = 0;
        }
    }
    qsort(listed, nlisted, sizeof *listed, by_text);
    Gaps g = {manifest, tmpl, gaps};
    if (one_numbering && tmpl[0])
        problems += shardcat_gaps(nums, nnums, say_gap, &g);
    for (size_t i = 0; i < npresent && tmpl[0]; i++) { /* of its numbering, beside it */
        if (shardcat_numbering(present[i], t2, sizeof t2, &num) || strcmp(t2, tmpl) ||
            has(listed, nlisted, present[i]) || has_number(nums, nnums, num))
            continue;
        if (one_numbering && nnums && num > nums[0] && num < nums[nnums - 1])
            continue; /* said as a gap */
        say(manifest, "beside it, not listed", present[i]);
        json_array_append_new(unlisted, cli_json_text(present[i]));
        problems++;
    }
    json_object_set_new(report, "set", cli_json_url(manifest));
    json_object_set_new(report, "listed", json_integer((json_int_t)nlisted));
    json_object_set_new(report, "missing", missing);
    json_object_set_new(report, "gaps", gaps);
    json_object_set_new(report, "unlisted", unlisted);
    json_object_set_new(report, "ok", json_boolean(problems == 0));
    free(listed);
    free(nums);
    free(present);
    shard_list_free(&folder);
    return problems;
}

size_t shardcat_set_health(const ShardcatWalk *w)
{
    size_t problems = 0;
    for (size_t spec = 0; spec < (size_t)w->cli->nargs; spec++) {
        if (!shard_list_manifest(w->list, spec))
            continue;
        json_t *report = json_object();
        size_t k = check_set(w, spec, report);
        problems += k;
        if (w->cli->json) {
            shardcat_json_line(report);
        } else {
            json_decref(report);
            fputs("set ", stdout);
            cli_print_url(stdout, w->cli->args[spec]);
            printf(": %s\n", k ? "not whole (said above)"
                               : "every shard there, no gap in its numbering, none beside it unlisted");
        }
    }
    return problems;
}
