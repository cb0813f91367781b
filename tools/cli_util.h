/* Argument parsing shared by the CLI's subcommands (prepost.c, cli_verbs.c, bench_verbs.c,
 * explore.c). */
#ifndef PREPOST_TOOLS_CLI_UTIL_H
#define PREPOST_TOOLS_CLI_UTIL_H

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

/* Writes s as a JSON string literal (quotes and escapes included). */
void pp_json_string(FILE *out, const char *s);

#endif
