/*
 * The text of XML elements (xml.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "remote/xml.h"
#include "shard/common.h"

int shard_xml_text(const char **p, const char *end, const char *tag, ShardBuf *out)
{
    char open[64], close[64];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    const char *a = strstr(*p, open);
    if (!a || (end && a >= end))
        return 0;
    a += strlen(open);
    const char *b = strstr(a, close);
    if (!b)
        return 0;
    out->len = 0;
    static const struct {
        const char *ent;
        char c;
    } ents[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    for (const char *s = a; s < b;) {
        char c = *s;
        size_t k = 1;
        if (c == '&') {
            for (size_t i = 0; i < sizeof ents / sizeof *ents; i++)
                if (!strncmp(s, ents[i].ent, strlen(ents[i].ent))) {
                    c = ents[i].c;
                    k = strlen(ents[i].ent);
                }
            if (k == 1 && s[1] == '#') { /* a character reference: ASCII only in keys we keep */
                char *e;
                long v = s[2] == 'x' ? strtol(s + 3, &e, 16) : strtol(s + 2, &e, 10);
                if (*e == ';' && v > 0 && v < 128) {
                    c = (char)v;
                    k = (size_t)(e + 1 - s);
                }
            }
        }
        if (shard_buf_append(out, &c, 1))
            return SHARD_ERR_NOMEM;
        s += k;
    }
    if (shard_buf_reserve(out, 1))
        return SHARD_ERR_NOMEM;
    out->data[out->len] = 0;
    *p = b + strlen(close);
    return 1;
}

int shard_xml_has(const char *body, const char *tag)
{
    char open[64];
    snprintf(open, sizeof open, "<%s>", tag);
    return body && strstr(body, open) != NULL;
}
