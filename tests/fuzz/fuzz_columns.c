/* The columns beside the index (formats/columns.md): any text parsed, and what parses
 * written back equal. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "tar/columns.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;
    ShardColumns c;
    char err[SHARD_ERROR_MAX];
    if (shard_columns_parse(&c, text, size, "fuzz.cols", err))
        return 0;
    size_t len;
    char *again = shard_columns_format(c.names, c.ncols, c.v, c.n, &len);
    /* what parsed writes back as text that parses to the same values */
    ShardColumns d;
    if (again && !shard_columns_parse(&d, again, len, "again.cols", err)) {
        if (d.n != c.n || d.ncols != c.ncols ||
            (c.n && memcmp(d.v, c.v, (size_t)c.n * c.ncols * sizeof *c.v)))
            abort();
        shard_columns_clear(&d);
    } else if (again) {
        abort();
    }
    shard_columns_clear(&c);
    return 0;
}
