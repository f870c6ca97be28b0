/* Columns beside the index (libshard/src/tar/columns.h; formats/columns.md): what is
 * written reads back, and every way a file can be wrong is refused naming its line. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "tar/columns.h"

TestSuite(columns, .timeout = 60);

static int parse(ShardColumns *c, const char *s, char *err)
{
    return shard_columns_parse(c, strdup(s), strlen(s), "t.cols", err);
}

Test(columns, what_is_written_reads_back)
{
    const char *names[] = {"width", "height"};
    uint32_t v[] = {640, 480, SHARD_COLUMN_NONE, SHARD_COLUMN_NONE, 1, 2147483647};
    size_t len;
    char *text = shard_columns_format(names, 2, v, 3, &len);
    cr_assert_str_eq(text, "libshard-cols 1 3 width:u32 height:u32\n640 480\n- -\n1 2147483647\n");
    ShardColumns c;
    char err[SHARD_ERROR_MAX];
    cr_assert_eq(shard_columns_parse(&c, text, len, "t.cols", err), 0, "%s", err);
    cr_assert_eq(c.n, 3);
    int w = shard_columns_find(&c, "width"), h = shard_columns_find(&c, "height");
    cr_assert(w == 0 && h == 1 && shard_columns_find(&c, "depth") == -1);
    for (uint64_t i = 0; i < 3; i++) {
        cr_assert_eq(shard_columns_value(&c, i, w), v[i * 2]);
        cr_assert_eq(shard_columns_value(&c, i, h), v[i * 2 + 1]);
    }
    shard_columns_clear(&c);
    /* a column this version does not know is kept by name, for a later reader to ignore */
    cr_assert_eq(parse(&c, "libshard-cols 1 1 aesthetic:u32 width:u32\n7 8\n", err), 0, "%s", err);
    cr_assert_eq(shard_columns_find(&c, "width"), 1);
    shard_columns_clear(&c);
}

Test(columns, a_wrong_file_is_refused_naming_its_line)
{
    static const struct {
        const char *text, *said;
    } bad[] = {
        {"libshard-cols 1 1 width:u32", "line 1: no header line"},
        {"v1.2 1\njpg 512 3 a.jpg\n", "line 1: not a columns file"},
        {"libshard-cols 2 1 width:u32\n1\n", "line 1: a version this libshard does not read"},
        {"libshard-cols 1 1 width:f32\n1\n", "line 1: a column that is not NAME:u32"},
        {"libshard-cols 1 1 wid th:u32\n1\n", "line 1: a column that is not NAME:u32"},
        {"libshard-cols 1 1 \n1\n", "line 1: no columns"},
        {"libshard-cols 1 99999999999 width:u32\n1\n", "line 1: a count larger than the file"},
        {"libshard-cols 1 2 width:u32\n100\n", "line 3: fewer lines than the count"},
        {"libshard-cols 1 1 width:u32 height:u32\n1234\n", "line 2: fewer values than columns"},
        {"libshard-cols 1 1 width:u32\n1 2\n", "line 2: more values than columns"},
        {"libshard-cols 1 1 width:u32\n01\n", "line 2: a value that is not a whole number"},
        {"libshard-cols 1 1 width:u32\n2147483648\n", "line 2: a value that is not a whole number"},
        {"libshard-cols 1 1 width:u32\n-5\n", "line 2: more values than columns"},
        {"libshard-cols 1 1 width:u32\n1\n2\n", "line 3: more lines than the count"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ShardColumns c;
        char err[SHARD_ERROR_MAX];
        cr_assert_eq(parse(&c, bad[i].text, err), SHARD_ERR_FORMAT, "%s", bad[i].text);
        cr_assert(strstr(err, bad[i].said) && !strncmp(err, "t.cols: ", 8), "%s: %s",
                  bad[i].text, err);
        cr_assert_null(c.text);
    }
}
