/*
 * "pipe:COMMAND" as a source (source.h), WebDataset's convention: the command runs under
 * /bin/sh and its standard output is the object. A pipe is a stream: no random access, no
 * mapping. The command's exit status is checked once the stream has been read to its end.
 *
 * The command never outlives the process that reads it: a shell watches a lifeline, a pipe
 * whose only writer is this process, and ends the command's process group when it reads
 * end-of-file, which a process killed outright (a DataLoader worker ended by its main process,
 * the OOM killer) closes too.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/error.h"
#include "source/pipe.h"
#include "source/source.h"

extern char **environ;

#define PIPE_BUFSIZE (1u << 20)

typedef struct PipeSource {
    int fd;
    pid_t pid; /* 0 once reaped; the leader of the command's process group */
    int life;  /* the lifeline's writing end, closed once the group is reaped */
    unsigned char *buf;
    ShardSourceThread *thread; /* told of the command while it runs, or NULL */
} PipeSource;

static ssize_t pipe_read(ShardSource *s, const void **block)
{
    PipeSource *p = s->impl;
    if (p->fd < 0)
        return 0;
    for (;;) {
        ssize_t k = read(p->fd, p->buf, PIPE_BUFSIZE);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return shard_fail(s->err, SHARD_ERR_IO, "%s: offset %llu: reading from the pipe: %s",
                              s->url, (unsigned long long)s->pos, strerror(errno));
        *block = p->buf;
        return k;
    }
}

static int pipe_finish(ShardSource *s)
{
    PipeSource *p = s->impl;
    if (p->fd >= 0) {
        close(p->fd);
        p->fd = -1;
    }
    if (p->pid <= 0)
        return 0;
    int status = 0;
    while (waitpid(p->pid, &status, 0) < 0 && errno == EINTR)
        ;
    p->pid = 0;
    close(p->life);
    p->life = -1;
    shard_source_thread_child(p->thread, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return shard_fail(s->err, SHARD_ERR_IO, "%s: the command failed (status %d)", s->url,
                          WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}

static void pipe_close(ShardSource *s)
{
    PipeSource *p = s->impl;
    if (!p)
        return;
    if (p->fd >= 0)
        close(p->fd);
    if (p->pid > 0) { /* closed early: the whole group, the shell's children too */
        shard_source_thread_child(p->thread, 0);
        kill(-p->pid, SIGTERM);
        waitpid(p->pid, NULL, 0);
    }
    if (p->life >= 0)
        close(p->life);
    free(p->buf);
    free(p);
}

/* Run as `sh -c WATCH sh CMD` with the lifeline on fd 3: a watcher waits on the lifeline
 * and kills the group at its end; the command runs beside it without fd 3; the leader passes
 * the command's status on (128 + N for a signal N) and ends the watcher. */
static const char WATCH[] =
    "{ read -r x <&3; kill -s KILL 0; } </dev/null >/dev/null 2>&1 & w=$!\n"
    "exec 3<&-\n"
    "( eval \"$1\" ) & c=$!\n"
    "exec >/dev/null\n"
    "wait $c; s=$?\n"
    "kill $w 2>/dev/null\n"
    "exit $s\n";

static const ShardSourceOps pipe_ops = {
    .kind = "pipe",
    .read = pipe_read,
    .finish = pipe_finish,
    .close = pipe_close,
};

int shard_source_pipe(ShardSource **out, const char *url, const char *cmd,
                      ShardSourceThread *t, char *err)
{
    *out = NULL;
    ShardSource *s = shard_source_new(&pipe_ops, url);
    PipeSource *p = s ? calloc(1, sizeof *p) : NULL;
    if (p)
        p->buf = malloc(PIPE_BUFSIZE);
    if (!p || !p->buf) {
        if (p)
            free(p);
        shard_source_put(s);
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", url);
    }
    p->fd = -1;
    p->life = -1;
    s->impl = p;
    int fds[2], life[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        int e = errno;
        shard_source_put(s);
        return shard_fail(err, SHARD_ERR_IO, "%s: pipe: %s", url, strerror(e));
    }
    if (pipe2(life, O_CLOEXEC) != 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        shard_source_put(s);
        return shard_fail(err, SHARD_ERR_IO, "%s: pipe: %s", url, strerror(e));
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, life[0], 3);
    posix_spawnattr_t at; /* a group of its own: stopped whole, never half */
    posix_spawnattr_init(&at);
    /* and signals as a shell started from a terminal has them: the spawning thread blocks
     * them all, and Python ignores SIGPIPE and SIGXFSZ */
    sigset_t none, dflt;
    sigemptyset(&none);
    sigemptyset(&dflt);
    sigaddset(&dflt, SIGPIPE);
    sigaddset(&dflt, SIGXFSZ);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &dflt);
    char *argv[] = {"sh", "-c", (char *)WATCH, "sh", (char *)cmd, NULL};
    int rc = posix_spawn(&p->pid, "/bin/sh", &fa, &at, argv, environ);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    close(life[0]);
    if (rc) {
        close(fds[0]);
        close(life[1]);
        p->pid = 0;
        shard_source_put(s);
        return shard_fail(err, SHARD_ERR_IO, "%s: cannot start the command: %s", url,
                          strerror(rc));
    }
    p->fd = fds[0];
    p->life = life[1];
    p->thread = t;
    if (shard_source_thread_child(t, p->pid)) /* its reader was stopped meanwhile */
        kill(-p->pid, SIGTERM);
    *out = s;
    return 0;
}
