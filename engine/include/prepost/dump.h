/* A readable snapshot of one engine's state, for `prepost replay --until/--at` and hang reports:
 * peers and connections, timers, statistics, then whatever the protocol and the workload say
 * about their queues, pending requests and credits (their optional `dump` slots). No I/O: the
 * text goes into the caller's buffer. */
#ifndef PP_DUMP_H
#define PP_DUMP_H

#include <stddef.h>

#include "engine.h"

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif
PP_API_BEGIN

/* snprintf-like: writes at most len bytes (NUL-terminated when len > 0), returns the length the
 * whole text has (it was cut when that is >= len). Lines are indented by two spaces. */
size_t pp_engine_dump(const struct pp_engine *e, char *buf, size_t len);

PP_API_END
#ifdef __cplusplus
}
#endif

#endif
