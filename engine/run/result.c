/*
 * The run contract (prepost/run.h): one aggregation of the ranks' results for every backend.
 */
#include "prepost/run.h"

#include <stdlib.h>
#include <string.h>

static const char *const outcome_names[] = {
#define PP_X(id, name, desc) [PP_OUTCOME_##id] = name,
    PP_OUTCOME_LIST(PP_X)
#undef PP_X
};

const char *pp_outcome_name(enum pp_outcome o)
{
  return (unsigned)o <= PP_OUTCOME_NO_PROGRESS ? outcome_names[o] : "?";
}

enum pp_status pp_run_result_init(struct pp_run_result *res, uint32_t nranks)
{
  memset(res, 0, sizeof(*res));
  res->ranks = calloc(nranks ? nranks : 1, sizeof(*res->ranks));
  if (!res->ranks)
    return PP_NOMEM;
  res->nranks = nranks;
  return PP_OK;
}

void pp_run_result_add_latency(struct pp_run_result *res, const struct pp_hist *h)
{
  if (!h) /* a rank that sends nothing records no latency */
    return;
  if (!res->latency_hist && (res->latency_hist = malloc(sizeof(*res->latency_hist))))
    pp_hist_reset(res->latency_hist);
  if (res->latency_hist)
    pp_hist_merge(res->latency_hist, h);
}

bool pp_run_result_finish(struct pp_run_result *res, enum pp_outcome stuck)
{
  uint64_t errors = 0;
  bool all_done = true;
  for (uint32_t i = 0; i < res->nranks; i++) {
    const struct pp_rank_stats *st = &res->ranks[i].stats;
    for (int k = 1; k < PP_WC_STATUS_COUNT; k++)
      errors += st->status_counts[k];
    errors += st->corrupt;
    all_done = all_done && st->done;
  }
  if (res->latency_hist) /* the same percentiles on every backend (prepost/hist.h) */
    pp_hist_summarize(res->latency_hist, &res->latency);
  res->outcome = errors ? PP_OUTCOME_ERRORS : all_done ? PP_OUTCOME_COMPLETED : stuck;
  return all_done;
}

struct pp_hang *pp_run_hang_new(const struct pp_run_result *res, uint64_t no_progress_ns)
{
  struct pp_hang *h = malloc(sizeof(*h));
  if (!h || pp_hang_init(h, res->nranks) != PP_OK) {
    free(h);
    return NULL;
  }
  h->trigger = res->outcome == PP_OUTCOME_NO_PROGRESS ? PP_HANG_TRIGGER_NO_PROGRESS
               : res->outcome == PP_OUTCOME_TIMEOUT   ? PP_HANG_TRIGGER_TIMEOUT
                                                      : PP_HANG_TRIGGER_QUIESCENCE;
  h->at_ns = res->sim_time_ns;
  h->no_progress_ns = no_progress_ns;
  return h;
}

void pp_run_result_free(struct pp_run_result *res)
{
  for (uint32_t i = 0; res->ranks && i < res->nranks; i++)
    free(res->ranks[i].receives);
  free(res->ranks);
  res->ranks = NULL;
  if (res->hang)
    pp_hang_free(res->hang);
  free(res->hang);
  res->hang = NULL;
  free(res->latency_hist);
  res->latency_hist = NULL;
}
