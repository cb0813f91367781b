/* Argument parsing shared by the CLI's subcommands (prepost.c, cli_verbs.c, bench_verbs.c,
 * explore.c). */
#ifndef PREPOST_TOOLS_CLI_UTIL_H
#define PREPOST_TOOLS_CLI_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Prints "WHO: " + fmt (with its one string argument), a blank line and `usage` on stderr;
 * returns 2, the CLI's exit code for a usage error. */
int pp_cli_usage_error(const char *who, const char *usage, const char *fmt, const char *arg);

/* The whole of s as an unsigned integer (decimal, 0x hex, 0 octal), no sign, no trailing
 * characters, no overflow: 0 and *out set, else -1 and *out untouched. */
int pp_cli_parse_u64(const char *s, uint64_t *out);

/* The same, within [lo, hi]. */
int pp_cli_parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out);

/* Where the models are (NIC profiles, platforms, scenarios) unless --models says: $PREPOST_MODELS,
 * else share/prepost/models of the prefix the running program is installed in, else the source
 * tree's models/ (a program run from the build tree). */
const char *pp_cli_models_dir(void);

/* Opens `path` for reading only if it is a regular file: opened with O_NONBLOCK (so opening a
 * FIFO or a device never blocks), fstat'ed, refused unless S_ISREG, then made blocking again.
 * The one way the tools open a model, scenario or trace file (a FIFO named by `nic:` used to
 * hang the CLI). NULL with a sentence in err ("is a directory", "is a FIFO, not a regular
 * file", strerror), without the path: the caller prefixes it (or file:line); errno is the
 * cause (EISDIR, EINVAL for the other kinds, open's errno). */
FILE *pp_open_regular(const char *path, char *err, size_t errlen);

/* Reads the whole regular file `path` (pp_open_regular) if it holds at most max bytes: 0 with
 * *data (malloc'd, NUL-terminated) and *len, -1 with a sentence in err as above (or "larger than
 * N bytes"); *too_big (if not NULL) says which. */
int pp_read_regular(const char *path, size_t max, char **data, size_t *len, bool *too_big,
                    char *err, size_t errlen);

/* Writes s as a JSON string literal (quotes and escapes included). */
void pp_json_string(FILE *out, const char *s);

#endif
