#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <shard/names.h>

#include "cli.h"

int cli_parse_u64(const char *s, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

int cli_parse_size(const char *s, uint64_t *out)
{
    if (!s || !(isdigit((unsigned char)*s) || *s == '.'))
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return -1;
    double mult = 1;
    if (*end) {
        static const char units[] = "KMGT";
        const char *u = strchr(units, toupper((unsigned char)*end));
        if (!u)
            return -1;
        int power = (int)(u - units) + 1;
        const char *rest = end + 1;
        double base = 1024;
        if (!strcmp(rest, "B") || !strcmp(rest, "b"))
            base = 1000;
        else if (*rest && strcmp(rest, "iB") && strcmp(rest, "ib"))
            return -1;
        mult = pow(base, power);
    }
    double bytes = v * mult;
    if (bytes >= 18446744073709551615.0 || bytes != floor(bytes))
        return -1;
    *out = (uint64_t)bytes;
    return 0;
}

const char *cli_human_bytes(double b, char *buf, size_t size)
{
    static const char *units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
    int i = 0;
    while (b >= 1000 && i < 5) {
        b /= 1000;
        i++;
    }
    snprintf(buf, size, i ? "%.1f %s" : "%.0f %s", b, units[i]);
    return buf;
}

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *cli_escape_path(const char *path, char *buf, size_t size)
{
    shard_escape(path, buf, size);
    return buf;
}

void cli_print_path(FILE *f, const char *path)
{
    char buf[4096];
    size_t n = shard_escape(path, buf, sizeof buf);
    char *big = n < sizeof buf ? NULL : malloc(n + 1);
    if (big)
        shard_escape(path, big, n + 1);
    fputs(big ? big : buf, f);
    free(big);
}

void cli_print_url(FILE *f, const char *url)
{
    size_t n = strlen(url) + 1;
    char *shown = malloc(n);
    if (!shown) {
        fputs("(a URL)", f);
        return;
    }
    shard_url_display(url, shown, n);
    cli_print_path(f, shown);
    free(shown);
}

const char *cli_url(const char *url, char *buf, size_t size)
{
    char shown[4096];
    shard_url_display(url, shown, sizeof shown);
    shard_escape(shown, buf, size);
    return buf;
}

json_t *cli_json_url(const char *url)
{
    size_t n = strlen(url) + 1;
    char *shown = malloc(n);
    if (!shown)
        return NULL;
    shard_url_display(url, shown, n);
    json_t *j = cli_json_text(shown);
    free(shown);
    return j;
}

int cli_usage_error(const char *prog, const char *msg)
{
    fprintf(stderr, "%s: %s\nTry '%s --help'.\n", prog, msg, prog);
    return 2;
}

/* Edit distance (insertions, deletions, substitutions, adjacent swaps) of a and b, capped
 * at 3: only "close" matters. */
static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64 || (la > lb ? la - lb : lb - la) > 2)
        return 3;
    size_t d[65][65];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb] < 3 ? d[la][lb] : 3;
}

const char *cli_closest(const char *word, const char *const *words, size_t n)
{
    const char *best = NULL;
    size_t bd = 3;
    for (size_t i = 0; i < n; i++) {
        size_t k = distance(word, words[i]);
        if (k < bd && 2 * k < strlen(word)) {
            bd = k;
            best = words[i];
        }
    }
    return best;
}

int cli_option_error(const char *prog, int c, const char *arg, const struct option *opts)
{
    char msg[256];
    if (c == ':') {
        snprintf(msg, sizeof msg, "%s wants a value", arg);
        return cli_usage_error(prog, msg);
    }
    const char *names[256], *near = NULL;
    size_t n = 0;
    for (; opts && opts[n].name && n < 256; n++)
        names[n] = opts[n].name;
    if (!strncmp(arg, "--", 2)) {
        char name[128];
        snprintf(name, sizeof name, "%s", arg + 2);
        char *eq = strchr(name, '=');
        if (eq)
            *eq = 0;
        near = cli_closest(name, names, n);
    }
    if (near)
        snprintf(msg, sizeof msg, "unknown option '%s' (did you mean '--%s'?)", arg, near);
    else
        snprintf(msg, sizeof msg, "unknown option '%s'", arg);
    return cli_usage_error(prog, msg);
}

int cli_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

void cli_progress_begin(CliProgress *p, int on, const char *unit, uint64_t total)
{
    p->on = on;
    p->unit = unit;
    p->total = total;
    p->t0 = p->last = cli_now();
    p->drawn = 0;
}

void cli_progress_update(CliProgress *p, uint64_t done, double bytes, int force)
{
    if (!p->on)
        return;
    double now = cli_now();
    if (!force && now - p->last < 0.1)
        return;
    p->last = now;
    double dt = now - p->t0, rate = dt > 0 ? bytes / dt : 0;
    char hb[32], hr[32];
    cli_human_bytes(bytes, hb, sizeof hb);
    cli_human_bytes(rate, hr, sizeof hr);
    if (p->total) {
        enum { WIDTH = 30 };
        char bar[WIDTH + 1];
        int fill = (int)((double)(done < p->total ? done : p->total) * WIDTH / (double)p->total);
        for (int i = 0; i < WIDTH; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[WIDTH] = 0;
        double eta = done ? dt * (double)(p->total - (done < p->total ? done : p->total)) / (double)done : 0;
        fprintf(stderr, "\r\033[K[%s] %llu/%llu %s  %s  %s/s  ETA %.0fs", bar,
                (unsigned long long)done, (unsigned long long)p->total, p->unit, hb, hr, eta);
    } else {
        fprintf(stderr, "\r\033[K%llu %s  %s  %s/s", (unsigned long long)done, p->unit, hb, hr);
    }
    fflush(stderr);
    p->drawn = 1;
}

void cli_progress_clear(CliProgress *p)
{
    if (p->on && p->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        p->drawn = 0;
    }
}

void cli_on_retry(void *prog, const char *line)
{
    fprintf(stderr, "%s: %s\n", (const char *)prog, line);
}

json_t *cli_json_text(const char *s)
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

const char *cli_face(const char *msg, char *buf, size_t size)
{
    static const char *const names[][2] = {
        {"shuffle_buffer=", "--shuffle "}, {"memory_budget=", "--memory-budget "},
        {"make_indexes=\"never\"", "--make-indexes never"},
        {"make_indexes=\"always\"", "--make-indexes always"}, {"mode=\"exact\"", "--mode exact"},
        {"mode=\"equal\"", "--mode equal"}, {"mode=\"resampled\"", "--mode resampled"}};
    size_t n = 0;
    for (const char *p = msg; *p && n + 1 < size;) {
        size_t k = 0;
        while (k < sizeof names / sizeof *names &&
               (strncmp(p, names[k][0], strlen(names[k][0])) ||
                (p > msg && p[-1] != ' ' && p[-1] != '(')))
            k++;
        const char *put = k < sizeof names / sizeof *names ? names[k][1] : NULL;
        if (put) {
            n += (size_t)snprintf(buf + n, size - n, "%s", put);
            p += strlen(names[k][0]);
        } else {
            buf[n++] = *p++;
        }
        if (n >= size)
            n = size - 1;
    }
    buf[n < size ? n : size - 1] = 0;
    return buf;
}
