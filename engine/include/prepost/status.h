/* prepost status codes: one enum for every module, each with a printable name. */
#ifndef PP_STATUS_H
#define PP_STATUS_H

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif
PP_API_BEGIN

/* X(name, description) */
#define PP_STATUS_LIST(X)                                                      \
  X(OK, "success")                                                             \
  X(AGAIN, "not now: out of credits or queue slots, retry later")              \
  X(INVALID, "invalid argument")                                               \
  X(NOMEM, "out of memory")                                                    \
  X(LIMIT, "a configured bound was reached")                                   \
  X(NOTFOUND, "no such object")                                                \
  X(STATE, "operation not allowed in the current state")                       \
  X(PROTECTION, "memory protection or key check failed")                       \
  X(IO, "input/output error")                                                  \
  X(PARSE, "malformed input")                                                  \
  X(UNSUPPORTED, "not supported by this backend")                            \
  X(EXISTS, "the name is taken already")

enum pp_status {
#define PP_X(name, desc) PP_##name,
  PP_STATUS_LIST(PP_X)
#undef PP_X
  PP_STATUS_COUNT
};

/* "OK", "AGAIN", ...; "?" for an out-of-range value. */
const char *pp_status_name(enum pp_status s);
/* A human sentence for the status. */
const char *pp_status_desc(enum pp_status s);

PP_API_END
#ifdef __cplusplus
}
#endif

#endif
