/*
 * The library's version (shard/common.h).
 */
#include "shard/common.h"
#include "shard/version.h"

const char *shard_version(void)
{
    return SHARD_VERSION_STRING;
}
