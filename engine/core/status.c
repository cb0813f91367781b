#include "prepost/status.h"

static const char *const names[] = {
#define PP_X(name, desc) [PP_##name] = #name,
    PP_STATUS_LIST(PP_X)
#undef PP_X
};

static const char *const descs[] = {
#define PP_X(name, desc) [PP_##name] = desc,
    PP_STATUS_LIST(PP_X)
#undef PP_X
};

const char *pp_status_name(enum pp_status s)
{
  return (unsigned)s < PP_STATUS_COUNT ? names[s] : "?";
}

const char *pp_status_desc(enum pp_status s)
{
  return (unsigned)s < PP_STATUS_COUNT ? descs[s] : "unknown status";
}
