/*
 * Application callbacks (prepost/app.h) that record what they are told, for the tests that
 * drive engines themselves (test_p2p, test_hostile, test_app): every completion with its
 * handle, cookie, time and full status, every peer failure, start, timer and async event. The
 * rank is the user_data.
 */
#ifndef PP_TEST_APP_LOG_H
#define PP_TEST_APP_LOG_H

#include <stdint.h>

#include "prepost/app.h"

#define APP_LOG_MAX 16384
#define APP_LOG_RANKS 8
#define APP_LOG_PEERS 64 /* engine_impl.h: PP_MAX_PEERS */

struct app_log_ev {
  uint32_t rank;
  bool recv;
  pp_req req;
  uint64_t cookie, now;
  struct pp_p2p_status st;
};

struct app_log {
  struct app_log_ev ev[APP_LOG_MAX];
  uint32_t n;
  struct pp_peer_failure fail[APP_LOG_RANKS][APP_LOG_PEERS];
  uint32_t nfail[APP_LOG_RANKS];
  uint32_t starts[APP_LOG_RANKS];
  uint32_t timers[APP_LOG_RANKS], last_timer_arg[APP_LOG_RANKS];
  uint64_t last_timer_ns[APP_LOG_RANKS];
  uint32_t errors[APP_LOG_RANKS];
  struct pp_async_event last_error[APP_LOG_RANKS];
};

extern struct app_log APP_LOG;

void app_log_reset(void);
/* Callbacks that record into APP_LOG (user_data: the rank, (void *)(uintptr_t)rank). */
void app_log_callbacks(struct pp_app_callbacks *cb);
/* The same status, field by field (the struct has padding: never memcmp it). */
bool app_log_status_eq(const struct pp_p2p_status *a, const struct pp_p2p_status *b);
/* The completion rank's request `req` was reported with, or NULL. */
const struct app_log_ev *app_log_find(uint32_t rank, pp_req req);

#endif
