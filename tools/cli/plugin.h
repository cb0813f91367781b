/* Plug-ins of the CLI: shared objects that register protocols (prepost/proto.h). */
#ifndef PREPOST_TOOLS_CLI_PLUGIN_H
#define PREPOST_TOOLS_CLI_PLUGIN_H

#include <stddef.h>

/* Loads one plug-in: dlopen, its prepost_plugin_abi must be PP_PROTO_ABI, then its
 * prepost_plugin_init(host). 0, or -1 with a sentence in err (a bad path, not a prepost
 * plug-in, another ABI, its init failed); a refused plug-in is unloaded. */
int pp_plugin_load(const char *path, char *err, size_t errlen);

/* Loads the plug-ins of $PREPOST_PLUGINS (a:b:c), then those of every `--plugin PATH` and
 * `--plugin=PATH` of argv[1..*argc-1], which it removes from argv. 0, or -1 with a sentence. */
int pp_plugins_from_args(int *argc, char **argv, char *err, size_t errlen);

/* The plug-ins loaded so far, as given (for command lines that reproduce a run). */
size_t pp_plugin_count(void);
const char *pp_plugin_path(size_t i);

#endif
