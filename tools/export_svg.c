#include "trace_cli.h"
int pp_export_svg(const struct pp_trace *t, FILE *out, const struct pp_export_opts *o, char *err,
                 size_t errlen)
{
  (void)t;
  (void)out;
  (void)o;
  snprintf(err, errlen, "not yet");
  return -1;
}
