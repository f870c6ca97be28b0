/*
 * JSON extents (jsonscan.h).
 */
#include "catalog/jsonscan.h"

void shard_json_ws(const char *text, size_t len, size_t *pos)
{
    while (*pos < len && (text[*pos] == ' ' || text[*pos] == '\t' || text[*pos] == '\n' ||
                          text[*pos] == '\r'))
        (*pos)++;
}

/* Past the string whose opening quote is at pos; 0, or -1 unterminated. */
static int skip_string(const char *text, size_t len, size_t *pos)
{
    for (size_t i = *pos + 1; i < len; i++) {
        if (text[i] == '\\')
            i++;
        else if (text[i] == '"') {
            *pos = i + 1;
            return 0;
        }
    }
    return -1;
}

int shard_json_extent(const char *text, size_t len, size_t pos, size_t *end)
{
    shard_json_ws(text, len, &pos);
    if (pos >= len)
        return -1;
    char c = text[pos];
    if (c == '"') {
        if (skip_string(text, len, &pos))
            return -1;
        *end = pos;
        return 0;
    }
    if (c != '[' && c != '{') { /* a number, true, false, null: up to a delimiter */
        size_t i = pos;
        while (i < len && text[i] != ',' && text[i] != ']' && text[i] != '}' && text[i] != ' ' &&
               text[i] != '\t' && text[i] != '\n' && text[i] != '\r' && text[i] != ':')
            i++;
        if (i == pos)
            return -1;
        *end = i;
        return 0;
    }
    int depth = 0;
    for (size_t i = pos; i < len; i++) {
        char k = text[i];
        if (k == '"') {
            if (skip_string(text, len, &i))
                return -1;
            i--; /* the loop's increment */
        } else if (k == '[' || k == '{') {
            if (++depth > SHARD_JSON_MAX_DEPTH)
                return -2;
        } else if (k == ']' || k == '}') {
            if (--depth == 0) {
                *end = i + 1;
                return 0;
            }
        }
    }
    return -1;
}
