/*
 * Runs the tests registered through tsan/criterion/criterion.h in this process, in
 * registration order, each between its suite's init and fini; prints Criterion's
 * synthesis line, which scripts/test_summary.py reads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "criterion/criterion.h"

#define MAX 64

static struct {
    const char *name;
    const tsh_suite_cfg *cfg;
} suites[MAX];
static int nsuites;

static struct {
    const char *suite, *name;
    void (*fn)(void);
} tests[MAX];
static int ntests;

void tsh_register_suite(const char *name, const tsh_suite_cfg *cfg)
{
    if (nsuites < MAX)
        suites[nsuites].name = name, suites[nsuites++].cfg = cfg;
}

void tsh_register_test(const char *suite, const char *name, void (*fn)(void))
{
    if (ntests < MAX)
        tests[ntests].suite = suite, tests[ntests].name = name, tests[ntests++].fn = fn;
}

static const char *current;
static jmp_buf skipped;

void tsh_skip(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("[SKIP] %s: ", current);
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
    longjmp(skipped, 1);
}

void tsh_fail(const char *file, int line, const char *expr, const char *fmt, ...)
{
    fprintf(stderr, "[FAIL] %s: %s:%d: %s", current, file, line, expr);
    if (fmt[1]) { /* the macros start every format with a space */
        va_list ap;
        va_start(ap, fmt);
        fputc(':', stderr);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
    }
    fputc('\n', stderr);
    printf("[====] Synthesis: Tested: %d | Passing: 0 | Failing: 1 | Crashing: 0\n", ntests);
    exit(1);
}

/* 1 when fn ran to its end, 0 when it skipped itself */
static int call(void (*fn)(void))
{
    if (setjmp(skipped))
        return 0;
    fn();
    return 1;
}

int main(void)
{
    int ran = 0;
    for (int i = 0; i < ntests; i++) {
        const tsh_suite_cfg *cfg = NULL;
        for (int k = 0; k < nsuites; k++)
            if (!strcmp(suites[k].name, tests[i].suite))
                cfg = suites[k].cfg;
        char name[256];
        snprintf(name, sizeof name, "%s::%s", tests[i].suite, tests[i].name);
        current = name;
        if (cfg && cfg->init)
            cfg->init();
        int done = call(tests[i].fn);
        if (cfg && cfg->fini)
            cfg->fini();
        if (done) {
            printf("[PASS] %s\n", name);
            ran++;
        }
    }
    /* as Criterion, skipped tests are not counted */
    printf("[====] Synthesis: Tested: %d | Passing: %d | Failing: 0 | Crashing: 0\n", ran, ran);
    return 0;
}
