/* An epoch's readings on the topologies it ran on (libshard/src/resume/history.h), as a
 * state carries them: what is written reads back, the last SHARD_HISTORY_MAX are kept, and
 * text that is not a history is refused. */
#include <criterion/criterion.h>
#include <string.h>

#include "base/error.h"
#include "resume/resume.h"

TestSuite(history, .timeout = 60);

Test(history, readings_read_back_as_written)
{
    ShardHistory h = {0}, back;
    cr_assert_eq(shard_history_add(&h, 0, 2, 2, NULL), 0);
    cr_assert_eq(shard_history_add(&h, 30, 3, 1, "left=10-20,40-50;edges=25"), 0);
    char buf[256] = "";
    cr_assert_eq(shard_history_format(&h, buf, sizeof buf), 0);
    cr_assert_str_eq(buf, "0@2.2@-|30@3.1@left=10-20,40-50/edges=25");
    char msg[SHARD_ERROR_MAX];
    cr_assert_eq(shard_history_parse(&back, buf, msg), 0, "%s", msg);
    cr_assert_eq(back.n, 2);
    cr_assert(back.v[0].step == 0 && back.v[0].world == 2 && back.v[0].workers == 2 &&
              !back.v[0].cut);
    cr_assert(back.v[1].step == 30 && back.v[1].world == 3 && back.v[1].workers == 1);
    cr_assert_str_eq(back.v[1].cut, "left=10-20,40-50;edges=25");
    char small[20] = "";
    cr_assert_eq(shard_history_format(&h, small, sizeof small), SHARD_ERR_INVALID);
    shard_history_free(&h);
    shard_history_free(&back);
}

Test(history, the_last_readings_are_kept)
{
    ShardHistory h = {0};
    for (int i = 0; i < SHARD_HISTORY_MAX + 3; i++)
        cr_assert_eq(shard_history_add(&h, (uint64_t)i * 10, 1 + i, 1, i ? "left=1-2;edges=" : NULL), 0);
    cr_assert_eq(h.n, SHARD_HISTORY_MAX);
    cr_assert(h.dropped);
    cr_assert_eq(h.v[0].step, 30);
    cr_assert_eq(h.v[SHARD_HISTORY_MAX - 1].step, (SHARD_HISTORY_MAX + 2) * 10);
    ShardHistory copy = {0};
    cr_assert_eq(shard_history_copy(&copy, &h), 0);
    cr_assert(copy.n == h.n && copy.dropped && !strcmp(copy.v[1].cut, h.v[1].cut));
    shard_history_free(&h);
    shard_history_free(&copy);
}

Test(history, text_that_is_not_a_history_is_refused)
{
    static const char *const bad[] = {"x", "3@2@-", "3@0.1@-", "3@2.1", "-1@2.2@-|",
                                      "0@1.1@-|0@1000000000.1000000000@-", /* no such job */
                                      "0@1.1@-|9@2.1@left=1-2;edges=|4@3.1@left=1-2;edges="};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ShardHistory h;
        char msg[SHARD_ERROR_MAX];
        cr_assert_eq(shard_history_parse(&h, bad[i], msg), SHARD_ERR_INVALID, "%s", bad[i]);
        cr_assert(strstr(msg, "are not STEP@RANKS.WORKERS@CUT"), "%s", msg);
        cr_assert_eq(h.n, 0);
    }
}
