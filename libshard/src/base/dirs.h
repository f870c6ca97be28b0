/*
 * Folders made when missing (dirs.c), parents too, as mkdir -p: the index cache's, a
 * writer's output folder.
 */
#ifndef SHARD_BASE_DIRS_H
#define SHARD_BASE_DIRS_H

#include "base/attr.h"

/* Makes dir and its missing parents. 0, or an error naming what asked (what) and the folder
 * that could not be made into err (SHARD_ERROR_MAX bytes). */
SHARD_HIDDEN int shard_make_dirs(const char *dir, const char *what, char *err);

#endif /* SHARD_BASE_DIRS_H */
