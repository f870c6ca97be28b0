/*
 * Helpers shared by the command-line tools (not installed, not part of the API).
 */
#ifndef SHARD_TOOLS_CLI_H
#define SHARD_TOOLS_CLI_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

/* Parses "1000", "3e9", "512K", "64M", "1.5G", "2T" (K/M/G/T and KiB/MiB/GiB/TiB are
 * powers of 1024; KB/MB/GB/TB powers of 1000). Returns 0 on success, -1 otherwise. */
int cli_parse_size(const char *s, uint64_t *out);

/* Parses a non-negative decimal integer that fits in uint64_t. Returns 0 or -1. */
int cli_parse_u64(const char *s, uint64_t *out);

/* Writes a byte count as "12.3 MB" into buf. */
const char *cli_human_bytes(double bytes, char *buf, size_t size);

/* Says "PROG: msg" and how to get help on stderr; returns 2, the bad-usage exit status. */
int cli_usage_error(const char *prog, const char *msg);

/* What getopt_long's ':' (an option without its value) or '?' (an unknown option) means,
 * said as cli_usage_error does, with the closest of opts (getopt_long's table) offered for
 * a misspelt one; arg is the option as written (argv[optind - 1]). Returns 2. */
int cli_option_error(const char *prog, int c, const char *arg, const struct option *opts);

/* ShardRemoteSettings.on_retry for the tools: "PROG: LINE" on stderr; cookie: the program's
 * name (a string that outlives the remote). */
void cli_on_retry(void *prog, const char *line);

/* The one of the n words closest to word, when it is close (a typo: 2 edits or fewer, less
 * than half the word), else NULL. */
const char *cli_closest(const char *word, const char *const *words, size_t n);

/* A JSON string of s; bytes that are not UTF-8 become U+FFFD, as JSON cannot hold them
 * (shardcat cat still gives a member's exact bytes). New reference, NULL without memory. */
json_t *cli_json_text(const char *s);

/* Whether s ends with suffix. */
int cli_ends_with(const char *s, const char *suffix);

/* Seconds from a monotonic clock. */
double cli_now(void);

/* A library message with the settings it names as the command line names them ("set
 * shuffle_buffer=N" becomes "set --shuffle N"), into buf (size bytes); a setting inside a
 * state's text (after ',' or ':') stays as it is; one is named after a space or '('. */
const char *cli_face(const char *msg, char *buf, size_t size);

/* Prints a name from a shard or a path so that control characters and invalid UTF-8 show
 * as \xNN escapes (shard_escape): nothing from a shard reaches the terminal raw. */
void cli_print_path(FILE *f, const char *path);
/* A URL as the tools show it (shard_url_display: no user, password or query), escaped:
 * printed to f, into buf, or as a JSON string. */
void cli_print_url(FILE *f, const char *url);
const char *cli_url(const char *url, char *buf, size_t size);
json_t *cli_json_url(const char *url);

/* The same into buf (cut to size). */
const char *cli_escape_path(const char *path, char *buf, size_t size);

/* A progress line on stderr, drawn over itself: only when on (a terminal, not -q). */
typedef struct CliProgress {
    int on;
    const char *unit; /* "shards", "samples" */
    uint64_t total;   /* 0: unknown (count and rate only) */
    double t0, last;
    int drawn;
} CliProgress;

void cli_progress_begin(CliProgress *p, int on, const char *unit, uint64_t total);
/* Redraws with done units and bytes so far, at most every 0.1 s unless force. */
void cli_progress_update(CliProgress *p, uint64_t done, double bytes, int force);
/* Clears the line, before other output to the terminal. */
void cli_progress_clear(CliProgress *p);

#endif /* SHARD_TOOLS_CLI_H */
