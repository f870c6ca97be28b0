/*
 * shardcat — see inside shards, check them, index them, extract them.
 *
 * Every command takes shards as paths, brace patterns ("train-{000000..000099}.tar") or
 * manifests. Data goes to stdout, errors to stderr. Exit status: 0 success, 1 a defect or
 * failure was found, 2 bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <shard/shard.h>

#include "bench.h"
#include "cli.h"

static void usage(FILE *f)
{
    fputs("usage: shardcat COMMAND [options] SHARD...\n"
          "\n"
          "  ls [--json] SHARD...          one line per sample: key and fields with their sizes\n"
          "                                in bytes (jpg:81234B cls:1B)\n"
          "  cat SHARD KEY.FIELD           the member's bytes to stdout\n"
          "  info [--json] SHARD...        samples, bytes, fields, compression, index\n"
          "  verify [--decode] [--json] SHARD...\n"
          "                                structure, index, seek table, manifest checksums,\n"
          "                                key rules; with --decode every JPEG decodes and\n"
          "                                every image field holds its kind of image\n"
          "  index SHARD...                write SHARD's .idx (DALI v1.2) for shards made elsewhere\n"
          "  extract SHARD... -C DIR       extract sample members into DIR, safely\n"
          "  bench SHARD... [--threads LIST] [--streams LIST] [--seconds S] ...\n"
          "                                decoded batches/s for each setting swept, the stage\n"
          "                                the others wait on, the decoder's ceiling, the best\n"
          "                                setting (shardcat bench --help)\n"
          "  stream URLS | --mix W:SPEC... [--shuffle N[:INITIAL]] [--seed S] [--epoch E]\n"
          "         [--rank R --world-size W] [--worker I --workers N]\n"
          "         [--mode exact|equal|resampled] [--pad]\n"
          "         [--epoch-samples N] [--streams N] [--skip-errors] [--samples N]\n"
          "         [--state STATE] [--json] [--stats] [--map]\n"
          "                                the streaming reader's samples, one line each (key, url);\n"
          "                                with --samples N it stops after N and prints the state\n"
          "                                to resume from on stderr; --mix W:SPEC (repeated) mixes\n"
          "                                sources, each W's share of every epoch; --map maps\n"
          "                                local shards (faster; a shard cut meanwhile: SIGBUS)\n"
          "\n"
          "  -q, --quiet          no progress line (one is drawn on stderr, when it is a\n"
          "                       terminal, over many shards and for stream)\n"
          "\n"
          "Manifests (every command):\n"
          "  --allow-manifest-commands\n"
          "                       let a manifest list pipe:COMMAND shards (a manifest from\n"
          "                       elsewhere runs nothing without it)\n"
          "\n"
          "Remote shards (every command):\n"
          "  --cache-dir DIR      keep remote shards in DIR (shared by processes)\n"
          "  --cache-size SIZE    the cache's limit, least recently used out first\n"
          "  --retries N          retries of a request that makes no progress (default 10)\n"
          "  --timeout S          connect timeout in seconds (default 10)\n"
          "  --stall-timeout S    cut and resume a transfer stalled this long (default 30)\n"
          "  --backoff S          first retry delay, doubled each retry (default 0.5)\n"
          "  --ca-bundle FILE     CA certificates (default: CURL_CA_BUNDLE, SSL_CERT_FILE)\n"
          "\n"
          "SHARD is a path, a brace pattern (train-{000000..000099}.tar), a manifest (.json),\n"
          "pipe:COMMAND, or http://, https://, gs://BUCKET/NAME, s3://BUCKET/KEY (the URLs\n"
          "also in patterns and manifests; gs:// and s3:// prefixes ending in / list every\n"
          "shard under them); file:///PATH is PATH. Exit status: 0 success, 1 a defect or\n"
          "failure, 2 bad usage. shardcat COMMAND --help: that command's help; --version.\n",
          f);
}

static int die_usage(const char *msg)
{
    return cli_usage_error("shardcat", msg);
}

/* Each command's own help (shardcat COMMAND --help). */
static const struct {
    const char *cmd, *text;
} command_help[] = {
    {"ls", "usage: shardcat ls [--json] SHARD...\n\n"
           "One line per sample: its key, then each field with its size in bytes (jpg:81234B).\n"
           "  --json   one JSON object per sample: __key__, __url__, fields {name: bytes}\n"},
    {"cat", "usage: shardcat cat SHARD KEY.FIELD\n\n"
            "Writes the member's bytes to stdout. SHARD may also be a manifest or a brace\n"
            "pattern: the first shard holding KEY gives it.\n"},
    {"info", "usage: shardcat info [--json] SHARD...\n\n"
             "Samples, bytes, fields, compression and index of each shard.\n"
             "  --json   one JSON object per shard\n"},
    {"verify", "usage: shardcat verify [--decode] [--json] SHARD...\n\n"
               "Checks structure, index, zstd seek table, manifest size and checksums and the\n"
               "key rules; exit status 1 when any shard has a defect.\n"
               "  --decode  also decode every JPEG, and check every image field holds its kind\n"
               "  --json    one JSON object per shard: url, ok, samples, members, index,\n"
               "            frames, jpegs, manifest, defects, error\n"},
    {"index", "usage: shardcat index SHARD...\n\n"
              "Writes SHARD's .idx (DALI v1.2) beside it, for shards made elsewhere.\n"},
    {"extract", "usage: shardcat extract SHARD... -C DIR\n\n"
                "Extracts the samples' members into DIR (no member leaves DIR).\n"},
    {"stream", NULL}, /* the global help's own section */
};

/* The command's help, or the global one; returns 0. */
static int help(const char *cmd)
{
    for (size_t i = 0; i < sizeof command_help / sizeof *command_help; i++)
        if (cmd && !strcmp(cmd, command_help[i].cmd) && command_help[i].text) {
            fputs(command_help[i].text, stdout);
            fputs("\nShards: paths, file:// URLs, brace patterns, manifests, pipe:COMMAND, "
                  "http(s)://,\ngs:// and s3:// (see shardcat --help for remote options).\n",
                  stdout);
            return 0;
        }
    usage(stdout);
    return 0;
}

/* Expands every argument into one list (with what each manifest says of its shards);
 * NULL after printing why an argument is unusable. */
static ShardList *collect(char **args, int n, ShardRemote *rm, int manifest_commands)
{
    ShardListSettings s;
    shard_list_default_settings(&s);
    s.counts = 0;
    s.remote = rm;
    s.manifest_commands = manifest_commands;
    ShardList *l;
    ShardError err;
    if (shard_list_expand(&l, (const char *const *)args, (size_t)n, &s, &err)) {
        fprintf(stderr, "shardcat: %s\n", err.message);
        return NULL;
    }
    return l;
}

static ShardFile *open_shard(const char *url, ShardFileSettings *s, ShardRemote *rm)
{
    ShardFile *f;
    ShardError err;
    s->remote = rm;
    if (shard_file_open(&f, url, s, &err)) {
        fprintf(stderr, "shardcat: %s\n", err.message);
        return NULL;
    }
    return f;
}

/* A JSON string of s; bytes that are not UTF-8 become U+FFFD, as JSON cannot hold them
 * (shardcat cat still gives the member's exact bytes). */
static json_t *json_text(const char *s)
{
    size_t n = strlen(s);
    if (shard_utf8_valid(s, n))
        return json_string(s);
    char *out = malloc(3 * n + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t len = 1;
        unsigned char c = (unsigned char)s[i];
        if (c >= 0xc0)
            len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
        if (i + len <= n && shard_utf8_valid(s + i, len)) {
            memcpy(out + o, s + i, len);
            o += len;
            i += len;
        } else {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    out[o] = 0;
    json_t *j = json_string(out);
    free(out);
    return j;
}

/* ---- ls ------------------------------------------------------------------------------ */

static int cmd_ls(const ShardList *t, int json, ShardRemote *rm)
{
    int status = 0;
    for (size_t i = 0; i < shard_list_count(t); i++) {
        ShardFileSettings s;
        shard_file_default_settings(&s);
        s.load_index = 0;
        ShardFile *f = open_shard(shard_list_entry(t, i)->url, &s, rm);
        if (!f) {
            status = 1;
            continue;
        }
        const ShardSampleView *v;
        int rc;
        while ((rc = shard_file_next(f, &v)) == 0) {
            if (json) {
                json_t *o = json_object(), *fields = json_object();
                json_object_set_new(o, "__key__", json_text(v->key));
                json_object_set_new(o, "__url__", json_text(v->url));
                for (size_t k = 0; k < v->nfields; k++) {
                    json_t *name = json_text(v->fields[k].name);
                    json_object_set_new(fields, json_string_value(name),
                                        json_integer((json_int_t)v->fields[k].size));
                    json_decref(name);
                }
                json_object_set_new(o, "fields", fields);
                char *line = json_dumps(o, JSON_COMPACT);
                if (line)
                    puts(line);
                free(line);
                json_decref(o);
            } else {
                cli_print_path(stdout, v->key);
                for (size_t k = 0; k < v->nfields; k++) {
                    fputs(k ? " " : "  ", stdout);
                    cli_print_path(stdout, v->fields[k].name);
                    printf(":%lluB", (unsigned long long)v->fields[k].size); /* a size */
                }
                putchar('\n');
            }
        }
        if (rc != SHARD_EOS) {
            fflush(stdout);
            fprintf(stderr, "shardcat: %s\n", shard_file_error(f));
            status = 1;
        }
        shard_file_free(&f);
    }
    return status;
}

/* ---- cat ----------------------------------------------------------------------------- */

/* The member KEY.FIELD from the first shard of t that holds KEY (a manifest or pattern
 * is searched shard by shard, in order). */
static int cmd_cat(const ShardList *t, const char *member, ShardRemote *rm)
{
    const char *slash = strrchr(member, '/');
    const char *dot = strchr(slash ? slash + 1 : member, '.');
    size_t klen = (size_t)(dot - member);
    for (size_t i = 0; i < shard_list_count(t); i++) {
        const char *url = shard_list_entry(t, i)->url;
        ShardFileSettings s;
        shard_file_default_settings(&s);
        ShardFile *f = open_shard(url, &s, rm);
        if (!f)
            return 1;
        const ShardSampleView *v;
        int rc;
        while ((rc = shard_file_next(f, &v)) == 0) {
            if (strlen(v->key) != klen || strncmp(v->key, member, klen))
                continue;
            for (size_t k = 0; k < v->nfields; k++) {
                /* fields come lower-cased (ASCII only, formats/shard.md 2.2): so is the one
                 * asked */
                if (!shard_field_equal(v->fields[k].name, dot + 1, s.lowercase))
                    continue;
                size_t n = fwrite(v->fields[k].data, 1, v->fields[k].size, stdout);
                int bad = n != v->fields[k].size || fflush(stdout) != 0;
                shard_file_free(&f);
                if (bad) {
                    fprintf(stderr, "shardcat: writing to stdout: %s\n", strerror(errno));
                    return 1;
                }
                return 0;
            }
            fprintf(stderr, "shardcat: %s: sample '%.*s' has no field '%s'\n", url, (int)klen,
                    member, dot + 1);
            shard_file_free(&f);
            return 1;
        }
        if (rc != SHARD_EOS) {
            fprintf(stderr, "shardcat: %s\n", shard_file_error(f));
            shard_file_free(&f);
            return 1;
        }
        shard_file_free(&f);
    }
    if (shard_list_count(t) == 1)
        fprintf(stderr, "shardcat: %s: no sample '%.*s'\n", shard_list_entry(t, 0)->url,
                (int)klen, member);
    else
        fprintf(stderr, "shardcat: no sample '%.*s' in any of %zu shards\n", (int)klen, member,
                shard_list_count(t));
    return 1;
}

/* ---- info ---------------------------------------------------------------------------- */

static int cmd_info(const ShardList *t, int json, ShardRemote *rm)
{
    int status = 0;
    for (size_t i = 0; i < shard_list_count(t); i++) {
        const char *url = shard_list_entry(t, i)->url;
        ShardFileSettings s;
        shard_file_default_settings(&s);
        ShardFile *f = open_shard(url, &s, rm);
        if (!f) {
            status = 1;
            continue;
        }
        json_t *hist = json_object();
        uint64_t samples = 0, members = 0, payload = 0, tarsize = 0;
        const ShardSampleView *v;
        int rc;
        while ((rc = shard_file_next(f, &v)) == 0) {
            samples++;
            members += v->nfields;
            for (size_t k = 0; k < v->nfields; k++) {
                const ShardFieldView *fv = &v->fields[k];
                json_t *name = json_text(fv->name);
                json_t *c = json_object_get(hist, json_string_value(name));
                json_object_set_new(hist, json_string_value(name),
                                    json_integer(c ? json_integer_value(c) + 1 : 1));
                json_decref(name);
                payload += fv->size;
                tarsize = fv->offset + ((fv->size + 511) & ~(uint64_t)511) + 1024;
            }
        }
        if (rc != SHARD_EOS) {
            fprintf(stderr, "shardcat: %s\n", shard_file_error(f));
            status = 1;
            json_decref(hist);
            shard_file_free(&f);
            continue;
        }
        char *ipath = shard_index_path(url);
        int has_index = ipath && shard_file_count(f) >= 0;
        json_t *o = json_object();
        json_object_set_new(o, "url", json_text(url));
        json_object_set_new(o, "samples", json_integer((json_int_t)samples));
        json_object_set_new(o, "members", json_integer((json_int_t)members));
        json_object_set_new(o, "payload_bytes", json_integer((json_int_t)payload));
        json_object_set_new(o, "tar_bytes", json_integer((json_int_t)tarsize));
        json_object_set_new(o, "file_bytes", json_integer((json_int_t)shard_file_size(f)));
        json_object_set_new(o, "compression", json_string(shard_file_compression(f)));
        json_object_set_new(o, "index", has_index ? json_text(ipath) : json_null());
        json_object_set_new(o, "index_samples", json_integer((json_int_t)shard_file_count(f)));
        json_object_set_new(o, "fields", hist);
        if (json) {
            char *line = json_dumps(o, JSON_COMPACT);
            if (line)
                puts(line);
            free(line);
        } else {
            char hb[32], ht[32];
            cli_print_path(stdout, url);
            printf("\n  samples      %llu (%llu members)\n  bytes        %s stored, %s as tar "
                   "(%s)\n  index        %s\n  fields      ", (unsigned long long)samples, (unsigned long long)members,
                   cli_human_bytes((double)shard_file_size(f), hb, sizeof hb),
                   cli_human_bytes((double)tarsize, ht, sizeof ht), shard_file_compression(f),
                   has_index ? ipath : "none");
            const char *name;
            json_t *val;
            json_object_foreach(hist, name, val) {
                putchar(' ');
                cli_print_path(stdout, name);
                printf(":%lld", (long long)json_integer_value(val));
            }
            putchar('\n');
        }
        json_decref(o);
        free(ipath);
        shard_file_free(&f);
    }
    return status;
}

/* ---- verify -------------------------------------------------------------------------- */

static void print_defect(void *cookie, const char *msg)
{
    (void)cookie;
    fprintf(stderr, "shardcat: %s\n", msg);
}

static int cmd_verify(const ShardList *t, int decode, int json, int bar, ShardRemote *rm)
{
    int status = 0;
    uint64_t bad = 0;
    CliProgress pg;
    cli_progress_begin(&pg, bar && shard_list_count(t) > 1, "shards", shard_list_count(t));
    double bytes = 0;
    for (size_t i = 0; i < shard_list_count(t); i++) {
        const char *url = shard_list_entry(t, i)->url;
        cli_progress_update(&pg, i, bytes, 1);
        ShardVerifySettings s;
        shard_verify_default_settings(&s);
        s.remote = rm;
        s.decode = decode;
        s.expect = shard_list_entry(t, i)->info;
        s.on_defect = print_defect;
        ShardVerifyResult r;
        ShardError err;
        int rc = shard_verify(url, &s, &r, &err);
        cli_progress_clear(&pg);
        bytes += rc ? 0 : (double)r.filesize;
        if (rc && rc != SHARD_ERR_FORMAT && rc != SHARD_ERR_CHECKSUM)
            fprintf(stderr, "shardcat: %s\n", err.message);
        if (rc) {
            status = 1;
            bad++;
        }
        if (json) {
            json_t *o = json_object();
            json_object_set_new(o, "url", json_text(url));
            json_object_set_new(o, "ok", json_boolean(rc == 0));
            json_object_set_new(o, "samples", json_integer((json_int_t)r.samples));
            json_object_set_new(o, "members", json_integer((json_int_t)r.members));
            json_object_set_new(o, "index", json_boolean(r.has_index));
            json_object_set_new(o, "frames", json_integer((json_int_t)r.frames));
            if (decode)
                json_object_set_new(o, "jpegs", json_integer((json_int_t)r.jpegs));
            json_object_set_new(o, "manifest", s.expect ? json_boolean(rc == 0) : json_null());
            json_object_set_new(o, "defects",
                                json_integer((json_int_t)(rc ? (r.defects ? r.defects : 1) : 0)));
            json_object_set_new(o, "error", rc ? json_text(err.message) : json_null());
            char *line = json_dumps(o, JSON_COMPACT);
            if (line)
                puts(line);
            free(line);
            json_decref(o);
        } else if (rc == 0) {
            cli_print_path(stdout, url);
            printf(": ok: %llu samples, %llu members%s", (unsigned long long)r.samples,
                   (unsigned long long)r.members, r.has_index ? ", index matches" : ", no index");
            if (r.frames)
                printf(", %llu zstd frames checked", (unsigned long long)r.frames);
            if (decode)
                printf(", %llu JPEGs decode", (unsigned long long)r.jpegs);
            if (s.expect)
                printf(", manifest size and checksums match");
            putchar('\n');
        } else {
            cli_print_path(stdout, url);
            printf(": FAILED (%llu defects)\n", (unsigned long long)(r.defects ? r.defects : 1));
        }
        fflush(stdout);
    }
    cli_progress_clear(&pg);
    if (shard_list_count(t) > 1 && !json)
        printf("%zu shards, %llu failed\n", shard_list_count(t), (unsigned long long)bad);
    return status;
}

/* ---- index --------------------------------------------------------------------------- */

static int cmd_index(const ShardList *t, int bar)
{
    int status = 0;
    CliProgress pg;
    cli_progress_begin(&pg, bar && shard_list_count(t) > 1, "shards", shard_list_count(t));
    for (size_t i = 0; i < shard_list_count(t); i++) {
        ShardError err;
        uint64_t n;
        cli_progress_update(&pg, i, 0, 1);
        int rc = shard_index_build(shard_list_entry(t, i)->url, NULL, &n, &err);
        cli_progress_clear(&pg);
        if (rc) {
            fprintf(stderr, "shardcat: %s\n", err.message);
            status = 1;
            continue;
        }
        char *ipath = shard_index_path(shard_list_entry(t, i)->url);
        printf("%s: %llu samples\n", ipath, (unsigned long long)n);
        free(ipath);
    }
    return status;
}

/* ---- extract ------------------------------------------------------------------------- */

typedef struct Extract {
    const char *url;
    int refused;
} Extract;

/* A link is refused, said and counted (it could point outside DIR); the other members
 * left out of the samples (folders, names that are not fields) are passed over. */
static void on_skip(void *cookie, const char *member, uint64_t offset, ShardSkipReason reason,
                    const char *why)
{
    Extract *x = cookie;
    if (reason != SHARD_SKIP_SYMLINK && reason != SHARD_SKIP_HARDLINK)
        return;
    char m[1024];
    fprintf(stderr, "shardcat: %s: offset %llu: member '%s' is %s: refused\n", x->url,
            (unsigned long long)offset, cli_escape_path(member, m, sizeof m), why);
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

/* Creates the file below dirfd, making folders on the way, never following a link that
 * is already there (O_NOFOLLOW on every component). */
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
    if (!e) {
        /* A new file under a temporary name, then renamed over the member's name: whatever
         * was there (a hard link to a file elsewhere, a FIFO, a symbolic link) is replaced,
         * never written through or waited on. */
        char tmp[64];
        snprintf(tmp, sizeof tmp, ".shardcat-%ld-%lu.tmp", (long)getpid(),
                 (unsigned long)(uintptr_t)data);
        int out = openat(fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (out < 0)
            e = errno;
        else {
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
            if (!e && renameat(fd, tmp, fd, comp) != 0)
                e = errno;
            if (e)
                unlinkat(fd, tmp, 0);
        }
    }
    close(fd);
    free(copy);
    return e;
}

static int cmd_extract(const ShardList *t, const char *dir, int bar, ShardRemote *rm)
{
    CliProgress pg;
    cli_progress_begin(&pg, bar && shard_list_count(t) > 1, "shards", shard_list_count(t));
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0) {
        fprintf(stderr, "shardcat: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    int status = 0;
    uint64_t files = 0;
    for (size_t i = 0; i < shard_list_count(t); i++) {
        cli_progress_update(&pg, i, 0, 1);
        cli_progress_clear(&pg); /* members' messages may follow */
        Extract x = {shard_list_entry(t, i)->url, 0};
        ShardFileSettings s;
        shard_file_default_settings(&s);
        s.lowercase = 0;
        s.load_index = 0;
        s.on_skip_reason = on_skip;
        s.cookie = &x;
        ShardFile *f = open_shard(shard_list_entry(t, i)->url, &s, rm);
        if (!f) {
            status = 1;
            continue;
        }
        const ShardSampleView *v;
        int rc;
        while ((rc = shard_file_next(f, &v)) == 0) {
            for (size_t k = 0; k < v->nfields; k++) {
                const ShardFieldView *fv = &v->fields[k];
                char m[1024];
                cli_escape_path(fv->member, m, sizeof m);
                if (!safe_path(fv->member)) {
                    fprintf(stderr, "shardcat: %s: offset %llu: member '%s' would land outside %s: "
                                    "refused\n",
                            x.url, (unsigned long long)fv->offset, m, dir);
                    x.refused++;
                    continue;
                }
                int e = write_member(dirfd, fv->member, fv->data, fv->size);
                if (e) {
                    fprintf(stderr, "shardcat: %s/%s: %s\n", dir, m, strerror(e));
                    status = 1;
                } else {
                    files++;
                }
            }
        }
        if (rc != SHARD_EOS) {
            fprintf(stderr, "shardcat: %s\n", shard_file_error(f));
            status = 1;
        }
        if (x.refused)
            status = 1;
        shard_file_free(&f);
    }
    close(dirfd);
    fprintf(stderr, "shardcat: extracted %llu files into %s\n", (unsigned long long)files, dir);
    return status;
}

/* ---- stream -------------------------------------------------------------------------- */

typedef struct StreamOpts {
    ShardReaderSettings s;
    uint64_t samples;
    int have_samples;
    const char *state;
    int json;
    int stats;
    int bar; /* progress line on stderr (a terminal, no -q) */
    ShardMixInput *mix; /* --mix sources, each of one spec (its urls point at spec) */
    const char **spec;
    size_t nmix;
} StreamOpts;

static int cmd_stream(StreamOpts *o, char **args, int nargs)
{
    if (o->nmix && nargs) {
        fprintf(stderr, "shardcat: give the shards as arguments or with --mix, not both\n");
        return 2;
    }
    o->s.urls = (const char *const *)args;
    o->s.nurls = (size_t)nargs;
    if (o->nmix) {
        for (size_t i = 0; i < o->nmix; i++)
            o->mix[i].urls = &o->spec[i];
        o->s.sources = o->mix;
        o->s.nsources = o->nmix;
    }
    ShardReader *r;
    ShardError err;
    if (shard_reader_open(&r, &o->s, &err)) {
        fprintf(stderr, "shardcat: %s\n", err.message);
        return 1;
    }
    if (!o->s.have_seed)
        fprintf(stderr, "shardcat: seed %llu (random; pass --seed to repeat this order)\n",
                (unsigned long long)shard_reader_seed(r));
    if (o->state && shard_reader_restore(r, o->state)) {
        fprintf(stderr, "shardcat: %s\n", shard_reader_error(r));
        shard_reader_free(&r);
        return 1;
    }
    int status = 0, rc = 0;
    uint64_t n = 0;
    const char *key, *url;
    const ShardFieldView *fields;
    size_t nfields;
    int64_t length = shard_reader_epoch_length(r);
    uint64_t total = o->have_samples ? o->samples : length > 0 ? (uint64_t)length : 0;
    CliProgress pg;
    /* over the samples printed only when they go elsewhere: a terminal shows them */
    cli_progress_begin(&pg, o->bar && !isatty(1), "samples", total);
    double bytes = 0;
    while ((!o->have_samples || n < o->samples) &&
           (rc = shard_reader_next(r, &key, &url, &fields, &nfields)) == 0) {
        for (size_t k = 0; k < nfields; k++)
            bytes += (double)fields[k].size;
        cli_progress_update(&pg, n, bytes, n == 0);
        if (o->json) {
            json_t *j = json_object();
            json_object_set_new(j, "__key__", json_text(key));
            json_object_set_new(j, "__url__", json_text(url));
            char *line = json_dumps(j, JSON_COMPACT);
            if (line)
                puts(line);
            free(line);
            json_decref(j);
        } else {
            cli_print_path(stdout, key);
            putchar('\t');
            cli_print_path(stdout, url);
            putchar('\n');
        }
        n++;
    }
    cli_progress_update(&pg, n, bytes, 1);
    cli_progress_clear(&pg);
    fflush(stdout);
    if (rc && rc != SHARD_EOS) {
        fprintf(stderr, "shardcat: %s\n", shard_reader_error(r));
        status = 1;
    }
    if (o->have_samples) {
        char state[128];
        shard_reader_state(r, state, sizeof state);
        fprintf(stderr, "state: %s\n", state);
    }
    for (size_t i = 0; shard_reader_kept_error(r, i); i++)
        fprintf(stderr, "shardcat: skipped: %s\n", shard_reader_kept_error(r, i));
    if (o->stats) {
        ShardRemoteStats rs;
        shard_remote_stats(shard_reader_remote(r), &rs);
        if (rs.requests || rs.cache_hits)
            fprintf(stderr,
                    "shardcat: remote: %llu requests, %llu bytes, %llu retries, %llu resumes, "
                    "%llu ranges answered whole, %llu replaced, %.3f s waiting on the network, "
                    "cache %llu hits %llu misses\n",
                    (unsigned long long)rs.requests, (unsigned long long)rs.bytes,
                    (unsigned long long)rs.retries, (unsigned long long)rs.resumes,
                    (unsigned long long)rs.range_ignored, (unsigned long long)rs.replaced,
                    rs.wait_seconds, (unsigned long long)rs.cache_hits,
                    (unsigned long long)rs.cache_misses);
        ShardReaderStats st;
        shard_reader_stats(r, &st);
        fprintf(stderr,
                "shardcat: %llu samples, %llu bytes, %llu shard opens, %.3f s waiting for data, "
                "%llu errors skipped (%llu shards, %llu samples lost)\n",
                (unsigned long long)st.samples, (unsigned long long)st.bytes,
                (unsigned long long)st.shards_opened, st.wait_seconds, (unsigned long long)st.errors,
                (unsigned long long)st.skipped_shards, (unsigned long long)st.skipped_samples);
        fprintf(stderr,
                "shardcat: stages: list %llu shard%s in %.3f s; fetch streams, summed: reading "
                "%.3f s (%llu bytes as stored), decompressing %.3f s (%llu bytes out), parsing "
                "%.3f s\n",
                (unsigned long long)st.shards, st.shards == 1 ? "" : "s", st.list_seconds,
                st.read_seconds, (unsigned long long)st.read_bytes, st.decompress_seconds,
                (unsigned long long)st.decompressed_bytes, st.parse_seconds);
    }
    shard_reader_free(&r);
    return status;
}

/* ---- main ---------------------------------------------------------------------------- */

static int run(const char *cmd, char **args, int nargs, int json, int decode, const char *dir,
               StreamOpts *o, ShardRemote *rm);

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage(stderr), 2;
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help"))
        return usage(stdout), 0;
    if (!strcmp(cmd, "bench")) /* options of its own */
        return shardcat_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
        printf("shardcat (libshard) %s\n", shard_version());
        return 0;
    }
    int json = 0, decode = 0;
    const char *dir = NULL;
    StreamOpts so;
    memset(&so, 0, sizeof so);
    shard_reader_default_settings(&so.s);
    int stream_opt = 0;
    ShardRemoteSettings ro;
    shard_remote_default_settings(&ro);
    enum { O_CACHE = 200, O_CACHE_SIZE, O_RETRIES, O_TIMEOUT, O_STALL, O_BACKOFF, O_CA,
           O_SHUFFLE = 256, O_SEED, O_EPOCH, O_RANK, O_WORLD, O_WORKER, O_WORKERS, O_MODE, O_PAD,
           O_EPOCH_SAMPLES, O_STREAMS, O_SKIP, O_SAMPLES, O_STATE, O_STATS, O_MIX, O_MAP,
           O_CMDS = 150 };
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'J'},         {"decode", no_argument, NULL, 'D'},
        {"help", no_argument, NULL, 'h'},         {"shuffle", required_argument, NULL, O_SHUFFLE},
        {"seed", required_argument, NULL, O_SEED}, {"epoch", required_argument, NULL, O_EPOCH},
        {"rank", required_argument, NULL, O_RANK}, {"world-size", required_argument, NULL, O_WORLD},
        {"worker", required_argument, NULL, O_WORKER}, {"workers", required_argument, NULL, O_WORKERS},
        {"mode", required_argument, NULL, O_MODE}, {"pad", no_argument, NULL, O_PAD},
        {"epoch-samples", required_argument, NULL, O_EPOCH_SAMPLES},
        {"streams", required_argument, NULL, O_STREAMS}, {"skip-errors", no_argument, NULL, O_SKIP},
        {"samples", required_argument, NULL, O_SAMPLES}, {"state", required_argument, NULL, O_STATE},
        {"stats", no_argument, NULL, O_STATS},    {"mix", required_argument, NULL, O_MIX},
        {"cache-dir", required_argument, NULL, O_CACHE},
        {"cache-size", required_argument, NULL, O_CACHE_SIZE},
        {"retries", required_argument, NULL, O_RETRIES},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {"stall-timeout", required_argument, NULL, O_STALL},
        {"backoff", required_argument, NULL, O_BACKOFF},
        {"ca-bundle", required_argument, NULL, O_CA},
        {"allow-manifest-commands", no_argument, NULL, O_CMDS},
        {"map", no_argument, NULL, O_MAP},
        {"quiet", no_argument, NULL, 'q'},
        {NULL, 0, NULL, 0},
    };
    optind = 2;
    opterr = 0; /* one message for an unknown option, ours */
    int c;
    uint64_t v;
    int quiet = 0;
    while ((c = getopt_long(argc, argv, ":C:hq", longopts, NULL)) != -1) {
        if (c >= O_SHUFFLE)
            stream_opt = 1;
        switch (c) {
        case 'J': json = 1; break;
        case 'D': decode = 1; break;
        case 'C': dir = optarg; break;
        case 'h': return help(cmd);
        case 'q': quiet = 1; break;
        case O_SHUFFLE: {
            char *colon = strchr(optarg, ':');
            if (colon)
                *colon = 0;
            if (cli_parse_u64(optarg, &v))
                return die_usage("--shuffle wants N or N:INITIAL");
            so.s.shuffle_buffer = (size_t)v;
            if (colon) {
                if (cli_parse_u64(colon + 1, &v))
                    return die_usage("--shuffle wants N or N:INITIAL");
                so.s.shuffle_initial = (size_t)v;
            }
            break;
        }
        case O_SEED:
            if (cli_parse_u64(optarg, &so.s.seed))
                return die_usage("--seed wants a whole number");
            so.s.have_seed = 1;
            break;
        case O_EPOCH:
            if (cli_parse_u64(optarg, &so.s.epoch))
                return die_usage("--epoch wants a whole number");
            break;
        case O_RANK:
        case O_WORLD:
        case O_WORKER:
        case O_WORKERS:
        case O_STREAMS:
            if (cli_parse_u64(optarg, &v) || v > (1u << 30))
                return die_usage("rank, world size, worker, workers and streams want whole numbers");
            if (c == O_RANK)
                so.s.rank = (int)v;
            else if (c == O_WORLD)
                so.s.world_size = (int)v;
            else if (c == O_WORKER)
                so.s.worker = (int)v;
            else if (c == O_WORKERS)
                so.s.num_workers = (int)v;
            else
                so.s.streams = (size_t)v;
            break;
        case O_MODE:
            if (!strcmp(optarg, "exact"))
                so.s.mode = SHARD_MODE_EXACT;
            else if (!strcmp(optarg, "equal"))
                so.s.mode = SHARD_MODE_EQUAL;
            else if (!strcmp(optarg, "resampled"))
                so.s.mode = SHARD_MODE_RESAMPLED;
            else
                return die_usage("--mode wants exact, equal or resampled");
            break;
        case O_PAD: so.s.pad = 1; break;
        case O_EPOCH_SAMPLES:
            if (cli_parse_u64(optarg, &so.s.epoch_samples))
                return die_usage("--epoch-samples wants a whole number");
            break;
        case O_SKIP: so.s.skip_errors = 1; break;
        case O_SAMPLES:
            if (cli_parse_u64(optarg, &so.samples))
                return die_usage("--samples wants a whole number");
            so.have_samples = 1;
            break;
        case O_STATE: so.state = optarg; break;
        case O_MIX: {
            /* WEIGHT:SPEC, the weight first: a spec may hold ':' (URLs) but a weight not */
            char *colon = strchr(optarg, ':'), *end;
            double w = colon ? strtod(optarg, &end) : 0;
            if (!colon || end != colon || !(w > 0) || !colon[1])
                return die_usage("--mix wants WEIGHT:SPEC, e.g. --mix 0.7:a/train.json");
            if (!so.mix) {
                so.mix = calloc((size_t)argc, sizeof *so.mix);
                so.spec = calloc((size_t)argc, sizeof *so.spec);
                if (!so.mix || !so.spec)
                    return die_usage("out of memory");
            }
            so.spec[so.nmix] = colon + 1;
            so.mix[so.nmix++] = (ShardMixInput){NULL, 1, w};
            break;
        }
        case O_STATS: so.stats = 1; break;
        case O_CACHE: ro.cache_dir = optarg; break;
        case O_CACHE_SIZE:
            if (cli_parse_size(optarg, &ro.cache_bytes))
                return die_usage("--cache-size wants a size, e.g. 100G");
            break;
        case O_RETRIES:
            if (cli_parse_u64(optarg, &v) || v > 1000)
                return die_usage("--retries wants a whole number up to 1000");
            ro.retries = (int)v;
            break;
        case O_TIMEOUT:
        case O_STALL:
        case O_BACKOFF: {
            char *end;
            double d = strtod(optarg, &end);
            if (*end || !(d >= 0) || d > 86400)
                return die_usage("--timeout, --stall-timeout and --backoff want seconds");
            if (c == O_TIMEOUT)
                ro.connect_timeout = d;
            else if (c == O_STALL)
                ro.stall_timeout = d;
            else
                ro.backoff = d;
            break;
        }
        case O_CA: ro.ca_bundle = optarg; break;
        case O_CMDS: so.s.manifest_commands = 1; break;
        case O_MAP: so.s.map_files = 1; break;
        case ':': {
            char msg[256];
            snprintf(msg, sizeof msg, "%s wants a value", argv[optind - 1]);
            return die_usage(msg);
        }
        default: {
            char msg[256];
            snprintf(msg, sizeof msg, "unknown option '%s'", argv[optind - 1]);
            return die_usage(msg);
        }
        }
    }
    char **args = argv + optind;
    int nargs = argc - optind;
    if (stream_opt && strcmp(cmd, "stream"))
        return die_usage("that option goes with stream");
    ShardRemote *rm;
    ShardError rerr;
    if (shard_remote_new(&rm, &ro, &rerr)) {
        fprintf(stderr, "shardcat: %s\n", rerr.message);
        return 2;
    }
    so.s.remote = rm;
    so.bar = !quiet && isatty(2); /* a progress line where someone watches */
    int status = run(cmd, args, nargs, json, decode, dir, &so, rm);
    shard_remote_free(&rm);
    free(so.mix);
    free(so.spec);
    return status;
}

/* The command, once its options are read. */
static int run(const char *cmd, char **args, int nargs, int json, int decode, const char *dir,
               StreamOpts *o, ShardRemote *rm)
{
    StreamOpts so = *o;
    if (!strcmp(cmd, "stream")) {
        if (nargs < 1 && !so.nmix)
            return die_usage("no shards given");
        if (decode || dir)
            return die_usage("--decode and -C do not go with stream");
        so.json = json;
        return cmd_stream(&so, args, nargs);
    }
    if (json && strcmp(cmd, "ls") && strcmp(cmd, "info") && strcmp(cmd, "verify"))
        return die_usage("--json goes with ls, info, verify and stream");
    if (decode && strcmp(cmd, "verify"))
        return die_usage("--decode goes with verify");
    if (dir && strcmp(cmd, "extract"))
        return die_usage("-C goes with extract");
    if (!strcmp(cmd, "cat")) {
        if (nargs != 2)
            return die_usage("cat wants SHARD KEY.FIELD");
        const char *member = args[1], *slash = strrchr(member, '/');
        if (!strchr(slash ? slash + 1 : member, '.'))
            return die_usage("cat wants KEY.FIELD, e.g. n01440764/img_0001.jpg");
        ShardList *t = collect(args, 1, rm, o->s.manifest_commands);
        int status = t ? cmd_cat(t, member, rm) : 1;
        shard_list_free(&t);
        return status;
    }
    if (strcmp(cmd, "ls") && strcmp(cmd, "info") && strcmp(cmd, "verify") && strcmp(cmd, "index") &&
        strcmp(cmd, "extract")) {
        fprintf(stderr, "shardcat: unknown command '%s'\n", cmd);
        usage(stderr);
        return 2;
    }
    if (nargs < 1)
        return die_usage("no SHARD given");
    if (!strcmp(cmd, "extract") && !dir)
        return die_usage("extract wants -C DIR");
    ShardList *t = collect(args, nargs, rm, o->s.manifest_commands);
    int status = 1;
    if (t) {
        if (!strcmp(cmd, "ls"))
            status = cmd_ls(t, json, rm);
        else if (!strcmp(cmd, "info"))
            status = cmd_info(t, json, rm);
        else if (!strcmp(cmd, "verify"))
            status = cmd_verify(t, decode, json, o->bar, rm);
        else if (!strcmp(cmd, "index"))
            status = cmd_index(t, o->bar);
        else
            status = cmd_extract(t, dir, o->bar, rm);
    }
    shard_list_free(&t);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        if (errno != EPIPE)
            fprintf(stderr, "shardcat: writing to stdout: %s\n", strerror(errno));
        return 1;
    }
    return status;
}
