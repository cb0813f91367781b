/*
 * pp_container_of: from a pointer to a member embedded in a struct (an intrusive list link, a
 * matching-queue entry) back to the struct, wherever the member sits in it (the Linux kernel's
 * container_of, in C11). Internal to the engine, not installed.
 */
#ifndef PP_CONTAINER_OF_H
#define PP_CONTAINER_OF_H

#include <stddef.h>

/* The `type` whose `member` ptr points to. ptr must point to that member's type (checked at
 * compile time: comparing it with &member warns otherwise); `type` may be const-qualified. */
#define pp_container_of(ptr, type, member)                                                         \
  ((void)sizeof((ptr) == &((type *)0)->member),                                                    \
   (type *)(void *)((char *)(ptr) - offsetof(type, member)))

#endif
