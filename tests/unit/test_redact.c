/* URLs as libshard shows them (base/url.h, shard_url_display): no user or password, the
 * query replaced by "?...", in any text; the same text redacted twice is the same; what is
 * not a URL passes as it is; and every message the library formats (shard_fail,
 * shard_report) is redacted. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "base/url.h"
#include "shard/common.h"

static const char *redacted(const char *in)
{
    static char buf[1024];
    snprintf(buf, sizeof buf, "%s", in);
    shard_url_redact_text(buf);
    return buf;
}

Test(redact, urls_lose_their_user_and_query_and_nothing_else)
{
    static const char *cases[][2] = {
        {"https://u:p@h/x.tar?X-Amz-Signature=abc: offset 5",
         "https://h/x.tar?...: offset 5"},
        {"s3://b/k.tar", "s3://b/k.tar"},
        {"http://user:p@ss@host:8080/a.tar, then", "http://host:8080/a.tar, then"},
        {"x 'gs://b/o.tar?sig=1' y", "x 'gs://b/o.tar?...' y"},
        {"a http://h/p?q then http://k:v@h2/p2?t=secret.", "a http://h/p then http://h2/p2?...."},
        {"http://h/p?ab", "http://h/p"},
        {"no url: plain/path.tar?x=1", "no url: plain/path.tar?x=1"},
        {"", ""},
        {"://@?", "://"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cr_assert_str_eq(redacted(cases[i][0]), cases[i][1], "case %zu", i);
        char twice[1024];
        snprintf(twice, sizeof twice, "%s", cases[i][1]);
        shard_url_redact_text(twice);
        cr_assert_str_eq(twice, cases[i][1], "case %zu redacted again", i);
    }
}

Test(redact, display_redacts_before_it_cuts)
{
    char out[24];
    shard_url_display("https://user:averylongpassword@h/x?s=1", out, sizeof out);
    cr_assert_str_eq(out, "https://h/x?...");
    shard_url_display("https://user:averylongpasswordthatgoesonandon@h/x", out, 12);
    cr_assert(!strstr(out, "password") && !strstr(out, "user"), "%s", out);
}

Test(redact, every_message_the_library_formats_is_redacted)
{
    char msg[SHARD_ERROR_MAX];
    shard_fail(msg, SHARD_ERR_IO, "%s: HTTP 403", "https://k:SECRET@h/a.tar?X-Amz-Security-Token=T0K");
    cr_assert_str_eq(msg, "https://h/a.tar?...: HTTP 403");
    ShardError e;
    shard_report(&e, SHARD_ERR_IO, "gs://b/o?token=zzz failed");
    cr_assert_str_eq(e.message, "gs://b/o?... failed");
}
