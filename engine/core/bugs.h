/*
 * Test-only protocol bugs: deliberate mistakes a test switches on (pp_engine_cfg.test_bugs, one
 * bit per bug) to prove that `prepost explore` finds and shrinks them. Every bug is off unless a
 * test, `prepost explore --bug NAME`, or a scenario's `test_bugs:` key turns it on; a build with
 * -DPREPOST_NO_TEST_BUGS compiles them out. Not a public header: the engine's modules and the
 * explorer include it.
 */
#ifndef PP_BUGS_H
#define PP_BUGS_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* X(id, name, description) */
#define PP_BUG_LIST(X)                                                                            \
  X(EARLY_REPOST, "early-repost",                                                                 \
    "stream: a slow consumer re-posts a buffer as soon as its message arrives, while it still "   \
    "reads it")                                                                                   \
  X(LOST_REPOST, "lost-repost", "stream: the first buffer due for re-posting is never re-posted") \
  X(SEND_REUSE, "send-reuse",                                                                     \
    "stream: every other message is built in the buffer of the previous one, whose send may "     \
    "not have completed")                                                                         \
  X(EARLY_CREDIT, "early-credit",                                                                 \
    "ring: credit returned before the slot's receive WQE is re-posted (the re-post waits for "    \
    "the next event)")                                                                            \
  X(EARLY_CTS, "early-cts",                                                                       \
    "p2p: an RPUT receiver sends each fragment's CTS before registering the fragment: the CTS "   \
    "advertises the slot's old rkey (none, or one already deregistered)")                        \
  X(WILDCARD_ORDER, "wildcard-order",                                                             \
    "p2p: an arriving message goes to a matching specific receive ahead of an earlier-posted "    \
    "wildcard receive (posting order broken)")                                                  \
  X(SRQ_NO_CREDITS, "srq-no-credits",                                                             \
    "p2p srq: senders send without a credit of the shared pool (and receivers do not hold them "  \
    "to it): RNR once the pool runs dry")                                                        \
  X(PONG_STALE, "pong-stale",                                                                     \
    "pingpong: the answering rank skips refilling a send buffer once: its third reply carries "  \
    "the bytes of its first")

enum pp_bug {
#define PP_X(id, name, desc) PP_BUG_##id,
  PP_BUG_LIST(PP_X)
#undef PP_X
      PP_BUG_COUNT
};

#ifdef PREPOST_NO_TEST_BUGS
#define PP_BUG(cfg, id) false
#else
/* Is bug `id` (PP_BUG_<id>) switched on in the engine configuration `cfg`? */
#define PP_BUG(cfg, id) ((((cfg)->test_bugs) >> PP_BUG_##id & 1u) != 0)
#endif

static inline const char *pp_bug_name(enum pp_bug b)
{
  static const char *const names[] = {
#define PP_X(id, name, desc) name,
      PP_BUG_LIST(PP_X)
#undef PP_X
  };
  return (unsigned)b < PP_BUG_COUNT ? names[b] : "?";
}

static inline const char *pp_bug_desc(enum pp_bug b)
{
  static const char *const descs[] = {
#define PP_X(id, name, desc) desc,
      PP_BUG_LIST(PP_X)
#undef PP_X
  };
  return (unsigned)b < PP_BUG_COUNT ? descs[b] : "?";
}

/* -1 when unknown */
static inline int pp_bug_from_name(const char *name)
{
  for (int b = 0; b < PP_BUG_COUNT; b++)
    if (!strcmp(name, pp_bug_name((enum pp_bug)b)))
      return b;
  return -1;
}

#endif
