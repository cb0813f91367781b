#include "sim_case.h"

#include <criterion/criterion.h>
#include <string.h>

struct pp_scenario sc;
struct pp_run_result res;

void sim_parse(const char *text)
{
  char err[1024] = "";
  cr_assert_eq(pp_scenario_parse(text, strlen(text), "inline.yaml", PREPOST_MODELS_DIR, &sc, err,
                                 sizeof(err)),
               PP_OK, "%s", err);
}

void sim_load(const char *name)
{
  char path[PP_PATH_MAX], err[1024] = "";
  snprintf(path, sizeof(path), "%s/scenarios/%s.yaml", PREPOST_MODELS_DIR, name);
  cr_assert_eq(pp_scenario_load(path, PREPOST_MODELS_DIR, &sc, err, sizeof(err)), PP_OK,
               "%s: %s", path, err);
}

void sim_run(FILE *log)
{
  char err[1024] = "";
  enum pp_status s = pp_sim_run(&sc.sim, log, &res, err, sizeof(err));
  cr_assert_eq(s, PP_OK, "pp_sim_run: %s: %s", pp_status_name(s), err);
  cr_assert_eq(res.nranks, sc.sim.engine.nranks);
  cr_assert_not_null(res.ranks);
}

void sim_fini(void)
{
  pp_run_result_free(&res);
}
