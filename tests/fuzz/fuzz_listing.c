/* The object stores' replies: a GCS listing page and token reply (JSON), an S3
 * ListObjectsV2 page (XML), a page of the Hugging Face Hub's tree (JSON). The first byte
 * picks the parser. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "remote/gcs.h"
#include "remote/hf.h"
#include "remote/store.h"
#include "remote/s3.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int count(void *cookie, const char *url, uint64_t size)
{
    (void)size;
    *(size_t *)cookie += strlen(url);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size)
        return 0;
    char *body = malloc(size);
    if (!body)
        return 0;
    memcpy(body, data + 1, size - 1);
    body[size - 1] = 0;
    ShardObject prefix = {data[0] % 2 ? SHARD_OBJ_S3 : SHARD_OBJ_GCS, "fuzz://b/p/", "b", "p/",
                          NULL};
    char err[SHARD_ERROR_MAX];
    size_t total = 0;
    switch (data[0] % 4) {
    case 0: {
        char *next = NULL;
        shard_gcs_parse_page(body, &prefix, count, &total, &next, err);
        free(next);
        break;
    }
    case 1: {
        ShardBuf token = {0};
        shard_s3_parse_page(body, &prefix, count, &total, &token, err);
        shard_buf_free(&token);
        break;
    }
    case 3:
        shard_hf_parse_tree(body, "fuzz://hf", "p/", count, &total, err);
        break;
    default: {
        char *token = NULL;
        double life;
        shard_gcs_parse_token(body, "fuzz://token", &token, &life, err);
        free(token);
    }
    }
    free(body);
    return 0;
}
