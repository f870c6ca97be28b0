/*
 * shardcat extract: the members of shards written into a folder, safely: names that would
 * leave the folder refused, no link followed, a member another shard of the run wrote
 * refused rather than overwritten.
 */
#include <errno.h>
#include <fcntl.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "shardcat_extract.h"
#include "shardcat_walk.h"

typedef struct Extract {
    int dirfd;      /* the destination */
    const char *url; /* the shard being extracted */
    int refused;    /* its members refused */
    uint64_t files; /* files written, over every shard */
    void *written;  /* the paths written, each with its shard (a tsearch tree of Written) */
} Extract;

typedef struct Written {
    char *path;      /* as the member names it, "./" taken off */
    const char *url; /* the shard it came from (the list's, borrowed) */
} Written;

static int written_cmp(const void *a, const void *b)
{
    return strcmp(((const Written *)a)->path, ((const Written *)b)->path);
}

static void written_free(void *p)
{
    free(((Written *)p)->path);
    free(p);
}

/* The shard that path was extracted from already in this run, or NULL (path now noted). */
static const char *extracted_before(Extract *x, const char *path)
{
    while (path[0] == '.' && path[1] == '/')
        path += 2;
    Written key = {(char *)path, NULL};
    Written **found = tfind(&key, &x->written, written_cmp);
    if (found)
        return (*found)->url;
    Written *w = malloc(sizeof *w);
    if (w && (w->path = strdup(path))) {
        w->url = x->url;
        if (tsearch(w, &x->written, written_cmp))
            return NULL;
        free(w->path);
    }
    free(w);
    return NULL; /* out of memory: no note, the file is written as before */
}

/* A link is refused, said and counted (it could point outside DIR); the other members
 * left out of the samples (folders, names that are not fields) are passed over. */
static void on_skip(void *cookie, const char *member, uint64_t offset, ShardSkipReason reason,
                    const char *why)
{
    Extract *x = cookie;
    if (reason != SHARD_SKIP_SYMLINK && reason != SHARD_SKIP_HARDLINK)
        return;
    char m[1024], ub[4096];
    fprintf(stderr, "shardcat: %s: offset %llu: member '%s' is %s: refused\n",
            cli_url(x->url, ub, sizeof ub), (unsigned long long)offset,
            cli_escape_path(member, m, sizeof m), why);
    x->refused++;
}

/* Whether a member path stays inside the destination: relative, no "..", no empty part. */
static int safe_path(const char *p)
{
    while (p[0] == '.' && p[1] == '/')
        p += 2;
    if (!*p || *p == '/')
        return 0;
    const char *comp = p;
    for (const char *q = p;; q++) {
        if (*q == '/' || !*q) {
            size_t n = (size_t)(q - comp);
            if (n == 0 || (n == 2 && comp[0] == '.' && comp[1] == '.'))
                return 0;
            if (!*q)
                return 1;
            comp = q + 1;
        }
    }
}

/* Writes a new file under a temporary name in the folder fd, then renames it over name:
 * whatever was there (a hard link to a file elsewhere, a FIFO, a symbolic link) is
 * replaced, never written through or waited on. Returns 0 or an errno. */
static int replace_file(int fd, const char *name, const unsigned char *data, uint64_t size)
{
    char tmp[64];
    snprintf(tmp, sizeof tmp, ".shardcat-%ld-%lu.tmp", (long)getpid(),
             (unsigned long)(uintptr_t)data);
    int out = openat(fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (out < 0)
        return errno;
    int e = 0;
    uint64_t done = 0;
    while (done < size) {
        ssize_t k = write(out, data + done, size - done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            e = errno;
            break;
        }
        done += (uint64_t)k;
    }
    if (close(out) != 0 && !e)
        e = errno;
    if (!e && renameat(fd, tmp, fd, name) != 0)
        e = errno;
    if (e)
        unlinkat(fd, tmp, 0);
    return e;
}

/* Creates the file below dirfd, making folders on the way, never following a link that
 * is already there (O_NOFOLLOW on every component). Returns 0 or an errno. */
static int write_member(int dirfd, const char *path, const unsigned char *data, uint64_t size)
{
    while (path[0] == '.' && path[1] == '/')
        path += 2;
    char *copy = strdup(path);
    if (!copy)
        return ENOMEM;
    int fd = dup(dirfd);
    char *comp = copy, *slash;
    int e = 0;
    while ((slash = strchr(comp, '/'))) {
        *slash = 0;
        if (strcmp(comp, ".") && mkdirat(fd, comp, 0755) != 0 && errno != EEXIST) {
            e = errno;
            break;
        }
        int next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (next < 0) {
            e = errno;
            break;
        }
        close(fd);
        fd = next;
        comp = slash + 1;
    }
    if (!e)
        e = replace_file(fd, comp, data, size);
    close(fd);
    free(copy);
    return e;
}

/* Extracts a sample's members; 1 when one could not be written (said). */
static int extract_sample(Extract *x, const char *dir, const ShardSampleView *v)
{
    int failed = 0;
    for (size_t k = 0; k < v->nfields; k++) {
        const ShardFieldView *fv = &v->fields[k];
        char m[1024], ub[4096];
        cli_escape_path(fv->member, m, sizeof m);
        cli_url(x->url, ub, sizeof ub);
        if (!safe_path(fv->member)) {
            fprintf(stderr, "shardcat: %s: offset %llu: member '%s' would land outside %s: "
                            "refused\n",
                    ub, (unsigned long long)fv->offset, m, dir);
            x->refused++;
            continue;
        }
        const char *before = extracted_before(x, fv->member);
        if (before) {
            char b[1024];
            fprintf(stderr, "shardcat: %s: offset %llu: member '%s' was extracted from %s "
                            "already: refused (extract those shards into folders of their "
                            "own)\n",
                    ub, (unsigned long long)fv->offset, m, cli_escape_path(before, b, sizeof b));
            x->refused++;
            continue;
        }
        int e = write_member(x->dirfd, fv->member, fv->data, fv->size);
        if (e) {
            fprintf(stderr, "shardcat: %s/%s: %s\n", dir, m, strerror(e));
            failed = 1;
        } else {
            x->files++;
        }
    }
    return failed;
}

/* DIR and the folders above it that are missing, as shardpack makes its output folder. */
static void make_dirs(const char *dir)
{
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
        return;
    for (char *s = p + 1;; s++) {
        if (*s && *s != '/')
            continue;
        char c = *s;
        *s = 0;
        mkdir(p, 0777);
        *s = c;
        if (!c)
            return;
    }
}

static int extract_begin(ShardcatWalk *w)
{
    Extract *x = w->cookie;
    make_dirs(w->cli->dir);
    x->dirfd = open(w->cli->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (x->dirfd < 0) {
        fprintf(stderr, "shardcat: %s: %s\n", w->cli->dir, strerror(errno));
        return 1;
    }
    return 0;
}

static ShardcatNext extract_shard(ShardcatWalk *w, const ShardListEntry *shard)
{
    Extract *x = w->cookie;
    cli_progress_clear(&w->pg); /* members' messages may follow */
    x->url = shard->url;
    x->refused = 0;
    ShardFileSettings s;
    shard_file_default_settings(&s);
    s.lowercase = 0;
    s.load_index = 0;
    s.on_skip_reason = on_skip;
    s.cookie = x;
    ShardFile *f = shardcat_open_shard(w, shard->url, &s);
    if (!f)
        return SHARDCAT_FAILED;
    const ShardSampleView *v;
    int rc, failed = 0;
    while ((rc = shard_file_next(f, &v)) == 0)
        failed |= extract_sample(x, w->cli->dir, v);
    if (rc != SHARD_EOS) {
        fprintf(stderr, "shardcat: %s\n", shard_file_error(f));
        failed = 1;
    }
    shard_file_free(&f);
    return failed || x->refused ? SHARDCAT_FAILED : SHARDCAT_NEXT;
}

static int extract_end(ShardcatWalk *w, int stopped)
{
    Extract *x = w->cookie;
    (void)stopped;
    close(x->dirfd);
    tdestroy(x->written, written_free);
    x->written = NULL;
    fprintf(stderr, "shardcat: extracted %llu files into %s\n", (unsigned long long)x->files,
            w->cli->dir);
    return 0;
}

int shardcat_extract(const ShardcatCli *cli, ShardRemote *remote)
{
    Extract x = {-1, NULL, 0, 0, NULL};
    ShardcatWalk w = {.visit = extract_shard, .begin = extract_begin, .end = extract_end,
                      .cookie = &x, .progress = 1};
    return shardcat_each_shard(cli, remote, (size_t)cli->nargs, &w);
}
