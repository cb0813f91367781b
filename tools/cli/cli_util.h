/* Argument parsing shared by the CLI's subcommands (prepost.c, cli_verbs.c, bench_verbs.c,
 * explore.c). */
#ifndef PREPOST_TOOLS_CLI_UTIL_H
#define PREPOST_TOOLS_CLI_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <getopt.h>

#include "prepost/status.h"

/* Prints "WHO: " + fmt (with its one string argument), a blank line and `usage` on stderr;
 * returns 2, the CLI's exit code for a usage error. */
int pp_cli_usage_error(const char *who, const char *usage, const char *fmt, const char *arg);

/* The whole of s as an unsigned integer (decimal, 0x hex, 0 octal), no sign, no trailing
 * characters, no overflow: 0 and *out set, else -1 and *out untouched. */
int pp_cli_parse_u64(const char *s, uint64_t *out);

/* The same, within [lo, hi]. */
int pp_cli_parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out);

/*
 * Options: getopt_long for every subcommand, with one set of messages. `--seed=7` and
 * `--seed 7` are the same; a long option may be shortened to a unique prefix; options and
 * operands mix in any order (`--` ends the options). The messages (then the usage and exit 2):
 *   unknown option '--frob'            option '--seed' needs a value
 *   option '--json' takes no value      ambiguous option '--s' (--seed, --set)
 *
 * Values go through the one set of parsers (prepost/param.h), with one rule for durations on
 * the command line: an option's duration needs its unit (500ns, 2us, 1.5ms, 10s, 5min, 1h;
 * 0 alone is 0), because a bare number has meant seconds to one option and nanoseconds to
 * another. In a scenario and in `--set KEY=VALUE` (scenario text) a bare integer is ns.
 */
struct pp_cli_opts {
  int argc;
  char **argv;                 /* argv[0]: the command's name (not parsed) */
  const char *shorts;          /* getopt's short option letters ("ho:"), may be NULL; a
                                  leading '+' ends the options at the first operand (a
                                  program's own arguments follow it: prepost mpirun) */
  const struct option *longs;  /* {0} terminated; .flag NULL, .val a short letter or >= 256 */
  const char *who, *usage;     /* for messages: "prepost", the command's usage */
  /* set by pp_cli_next */
  const char *arg;             /* the value of the option just returned, or NULL */
  char name[48];               /* how it is called in messages: "--seed" or "-o" */
  int rest;                    /* at the end: argv[rest..argc) are the operands */
  bool started;
};
enum { PP_CLI_END = -1, PP_CLI_BAD = -2 };

/* The next option's .val; PP_CLI_END after the last one (o->rest set); PP_CLI_BAD after
 * printing the message and the usage on stderr (the caller exits 2). */
int pp_cli_next(struct pp_cli_opts *o);

/* A usage error about the current option: "WHO: NAME fmt" (fmt with one string argument, often
 * o->arg), then the usage; returns 2. */
int pp_cli_opt_error(const struct pp_cli_opts *o, const char *fmt, const char *arg);

/* The current option's value through the one parser of its kind, within [lo, hi]: 0 and *out, or
 * the message ("--ib-port must be an integer 1..255, got '0'") and 2. */
int pp_cli_opt_uint(const struct pp_cli_opts *o, uint64_t lo, uint64_t hi, uint64_t *out);
int pp_cli_opt_size(const struct pp_cli_opts *o, uint64_t lo, uint64_t hi, uint64_t *out);
int pp_cli_opt_duration(const struct pp_cli_opts *o, uint64_t lo, uint64_t hi, uint64_t *ns);

/* A command-line duration: text as pp_parse_duration reads it, but a bare integer other than 0
 * is refused (PP_PARSE, "needs a unit: ..."). why: the tail of "--OPT must ...". */
enum pp_status pp_cli_parse_duration(const char *text, uint64_t lo, uint64_t hi, uint64_t *ns,
                                     char *why, size_t whylen);

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
