#include <criterion/criterion.h>
#include <string.h>

#include <shard/names.h>

static void split_ok(const char *member, const char *key, const char *field)
{
    size_t start, len;
    const char *f;
    cr_assert_eq(shard_name_split(member, &start, &len, &f), 0, "%s", member);
    cr_assert_eq(len, strlen(key), "%s: key length %zu", member, len);
    cr_assert(!strncmp(member + start, key, len), "%s", member);
    cr_assert_str_eq(f, field, "%s", member);
}

static void split_skip(const char *member)
{
    size_t start, len;
    const char *f;
    cr_assert_eq(shard_name_split(member, &start, &len, &f), SHARD_ERR_NOT_FOUND, "%s", member);
}

Test(names, webdataset_rule)
{
    split_ok("a/b.jpg", "a/b", "jpg");
    split_ok("a/b.seg.png", "a/b", "seg.png");
    split_ok("a.d/b.c.d", "a.d/b", "c.d");
    split_ok("./x/y.cls", "x/y", "cls");
    split_ok("././x.cls", "x", "cls");
    split_ok("k.", "k", "");
    split_skip("a/noext");
    split_skip("a/.hidden");
    split_skip(".hidden.txt");
    split_skip("__key__.txt");
    split_skip("d/__meta__.json");
}

Test(names, key_check)
{
    cr_assert_eq(shard_key_check("n01/img_1"), 0);
    cr_assert_eq(shard_key_check("a.b/c"), 0, "dots are fine in folder names");
    cr_assert_eq(shard_key_check("naïve"), 0);
    cr_assert_eq(shard_key_check(""), SHARD_ERR_INVALID);
    cr_assert_eq(shard_key_check("a.b"), SHARD_ERR_INVALID);
    cr_assert_eq(shard_key_check("a b"), SHARD_ERR_INVALID);
    cr_assert_eq(shard_key_check("/abs"), SHARD_ERR_INVALID);
    cr_assert_eq(shard_key_check("a//b"), SHARD_ERR_INVALID);
    cr_assert_eq(shard_key_check("../b"), SHARD_ERR_INVALID);
    cr_assert_eq(shard_key_check("a/"), SHARD_ERR_INVALID);
    cr_assert_eq(shard_key_check("a/__x"), SHARD_ERR_INVALID);
    cr_assert_eq(shard_key_check("bad\xff"), SHARD_ERR_INVALID);
    cr_assert_eq(shard_key_check("tab\there"), SHARD_ERR_INVALID);
    cr_assert_eq(shard_key_check("my dir/x"), SHARD_ERR_INVALID, "a space anywhere breaks .idx lines");
}

Test(names, key_from_path)
{
    char out[256];
    cr_assert_eq(shard_key_from_path("n01/img.v2 final.JPEG", out, sizeof out), 16);
    cr_assert_str_eq(out, "n01/img_v2_final");
    cr_assert_gt(shard_key_from_path("a.b/c.d.jpg", out, sizeof out), 0);
    cr_assert_str_eq(out, "a_b/c_d");
    cr_assert_gt(shard_key_from_path("noext", out, sizeof out), 0);
    cr_assert_str_eq(out, "noext");
    cr_assert_gt(shard_key_from_path("d/__x.jpg", out, sizeof out), 0);
    cr_assert_str_eq(out, "d/x__x");
    cr_assert_eq(shard_key_check(out), 0);
    cr_assert_eq(shard_key_from_path("bad\xff.jpg", out, sizeof out), SHARD_ERR_FORMAT);
    cr_assert_eq(shard_key_from_path("a//b.jpg", out, sizeof out), SHARD_ERR_FORMAT);
    cr_assert_eq(shard_key_from_path("../b.jpg", out, sizeof out), SHARD_ERR_FORMAT);
    cr_assert_eq(shard_key_from_path("long/name.jpg", out, 4), SHARD_ERR_INVALID);
}

Test(names, utf8)
{
    cr_assert(shard_utf8_valid("plain", 5));
    cr_assert(shard_utf8_valid("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9));
    cr_assert(!shard_utf8_valid("\xc0\xaf", 2), "overlong");
    cr_assert(!shard_utf8_valid("\xed\xa0\x80", 3), "surrogate");
    cr_assert(!shard_utf8_valid("\xe2\x82", 2), "truncated");
    cr_assert(!shard_utf8_valid("\xff", 1));
}

Test(names, unicode_whitespace)
{
    char out[256];
    /* U+00A0 no-break space, U+3000 ideographic space, U+2009 thin space */
    cr_assert_gt(shard_key_from_path("a\xc2\xa0" "b\xe3\x80\x80" "c\xe2\x80\x89" "d.jpg", out, sizeof out), 0);
    cr_assert_str_eq(out, "a_b_c_d");
    cr_assert_eq(shard_key_check(out), 0);
    cr_assert_eq(shard_key_check("a\xc2\xa0" "b"), SHARD_ERR_INVALID);
    cr_assert_gt(shard_key_from_path("caf\xc3\xa9/na\xc3\xafve.jpg", out, sizeof out), 0);
    cr_assert_str_eq(out, "caf\xc3\xa9/na\xc3\xafve", "other non-ASCII letters stay");
}
