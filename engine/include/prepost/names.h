/* Name tables of the X-macro lists: value -> printable name and back, one implementation for
 * every enum of the engine. A table is an array of `count` strings indexed by value (NULL holes
 * allowed where the values are sparse). */
#ifndef PP_NAMES_H
#define PP_NAMES_H

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif
PP_API_BEGIN

/* The name of value v, or "?" when v is out of range or has no name. */
const char *pp_name_of(const char *const *names, int count, long v);
/* The value whose name is `name`, or -1. */
int pp_name_index(const char *const *names, int count, const char *name);

#define PP_NAMES_COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

PP_API_END
#ifdef __cplusplus
}
#endif

#endif
