/*
 * A stand-in for the part of Criterion's API the threaded unit tests use, for their
 * ThreadSanitizer build: Criterion runs each test in a sandboxed child whose shared memory
 * arena it maps at addresses ThreadSanitizer reserves for its shadow (Criterion issue 274),
 * so under TSan the same test sources run in one process, one test after another, through
 * this header and harness.c. A failed assertion says where and why and ends the run.
 */
#ifndef SHARD_TSAN_CRITERION_H
#define SHARD_TSAN_CRITERION_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tsh_suite_cfg {
    void (*init)(void);
    void (*fini)(void);
    double timeout;
} tsh_suite_cfg;

void tsh_register_suite(const char *name, const tsh_suite_cfg *cfg);
void tsh_register_test(const char *suite, const char *name, void (*fn)(void));
void tsh_fail(const char *file, int line, const char *expr, const char *fmt, ...)
    __attribute__((format(printf, 4, 5), noreturn));
void tsh_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#define TestSuite(Name, ...)                                                                   \
    static const tsh_suite_cfg tsh_cfg_##Name = {__VA_ARGS__};                                 \
    __attribute__((constructor)) static void tsh_reg_suite_##Name(void)                        \
    {                                                                                          \
        tsh_register_suite(#Name, &tsh_cfg_##Name);                                            \
    }

#define Test(Suite, Name, ...)                                                                 \
    static void tsh_test_##Suite##_##Name(void);                                               \
    __attribute__((constructor)) static void tsh_reg_##Suite##_##Name(void)                    \
    {                                                                                          \
        tsh_register_test(#Suite, #Name, tsh_test_##Suite##_##Name);                           \
    }                                                                                          \
    static void tsh_test_##Suite##_##Name(void)

/* The message arguments are optional: " " starts the format, whether one follows or not. */
#define cr_assert(Cond, ...)                                                                   \
    do {                                                                                       \
        if (!(Cond))                                                                           \
            tsh_fail(__FILE__, __LINE__, #Cond, " " __VA_ARGS__);                               \
    } while (0)
#define tsh_cmp(A, Op, B, ...) cr_assert((A)Op(B), __VA_ARGS__)
#define cr_assert_eq(A, B, ...) tsh_cmp(A, ==, B, __VA_ARGS__)
#define cr_assert_neq(A, B, ...) tsh_cmp(A, !=, B, __VA_ARGS__)
#define cr_assert_lt(A, B, ...) tsh_cmp(A, <, B, __VA_ARGS__)
#define cr_assert_leq(A, B, ...) tsh_cmp(A, <=, B, __VA_ARGS__)
#define cr_assert_gt(A, B, ...) tsh_cmp(A, >, B, __VA_ARGS__)
#define cr_assert_geq(A, B, ...) tsh_cmp(A, >=, B, __VA_ARGS__)
#define cr_assert_null(P, ...) cr_assert((P) == NULL, __VA_ARGS__)
#define cr_assert_not_null(P, ...) cr_assert((P) != NULL, __VA_ARGS__)
#define cr_assert_str_eq(A, B, ...) cr_assert(strcmp((A), (B)) == 0, __VA_ARGS__)
#define cr_assert_str_neq(A, B, ...) cr_assert(strcmp((A), (B)) != 0, __VA_ARGS__)
#define cr_assert_arr_eq(A, B, Size, ...) cr_assert(memcmp((A), (B), (Size)) == 0, __VA_ARGS__)
/* Ends the test as skipped, saying why (from any function it calls, as Criterion's does). */
#define cr_skip_test(...) tsh_skip(__VA_ARGS__)

#endif /* SHARD_TSAN_CRITERION_H */
