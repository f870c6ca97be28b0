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

/* Makes a cache's folder (what names it) as shard_make_dirs, the last one 0700, and takes it
 * only when this user alone can write it: a folder (not a link to one) owned by this user,
 * writable by no other (a cache in a folder others can write would serve what they
 * planted). 0, or SHARD_ERR_INVALID with err saying why and how to go on. */
SHARD_HIDDEN int shard_private_dir(const char *dir, const char *what, char *err);

/* dir opened as a folder to list and clear names in, relative to the descriptor (openat,
 * unlinkat): a folder, never a link to one, so nothing outside it is reached; the
 * descriptor (O_CLOEXEC), or -1 with errno (ELOOP or ENOTDIR for a link). */
SHARD_HIDDEN int shard_dir_open(const char *dir);

/* What kind of thing a stat mode says a name is, for messages: "a symbolic link", "a FIFO",
 * "a socket", "a device", "a folder", "a file". */
SHARD_HIDDEN const char *shard_file_kind(unsigned mode);

#endif /* SHARD_BASE_DIRS_H */
