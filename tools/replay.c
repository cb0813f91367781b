/* prepost replay (placeholder until exact replay lands) */
#include "trace_cli.h"
const char *const pp_replay_usage = "usage: prepost replay TRACE\n";
int pp_cli_replay(int argc, char **argv)
{
  (void)argc;
  (void)argv;
  fputs("prepost: replay: not yet\n", stderr);
  return 2;
}
