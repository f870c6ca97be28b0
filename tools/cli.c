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

int cli_usage_error(const char *prog, const char *msg)
{
    fprintf(stderr, "%s: %s\nTry '%s --help'.\n", prog, msg, prog);
    return 2;
}

int cli_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}
