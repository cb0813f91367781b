/* Field table of the traffic workload's keys of `workload` (struct pp_traffic,
 * prepost/p2p_cfg.h). 0 where the default is derived (see each key's doc). */
#include "prepost/p2p_cfg.h"
#include "prepost/engine.h"
#include "prepost/param.h"

static const char *const dist_names[] = {
#define PP_X(id, name, desc) name,
    PP_SIZE_DIST_LIST(PP_X)
#undef PP_X
};
static const char *const recv_names[] = {
#define PP_X(id, name, desc) name,
    PP_RECV_MODE_LIST(PP_X)
#undef PP_X
};

#define T struct pp_traffic
#define D PP_PARAM_F_DERIVED
const struct pp_param pp_traffic_param_table[] = {
    PP_PARAM_KEYED("size_max", T, size_max, PP_PARAM_SIZE, PP_MSG_HEADER, PP_MAX_MSG_SIZE, 0,
                   "traffic: the largest message (derived: size)", NULL, D),
    PP_PARAM_KEYED("size_dist", T, dist, PP_PARAM_ENUM, 0, PP_DIST_COUNT - 1, 0,
                   "traffic: how sizes are drawn in [size, size_max]", dist_names, 0),
    PP_PARAM_KEYED("receives", T, recv_mode, PP_PARAM_ENUM, 0, PP_RECV_MODE_COUNT - 1, 0,
                   "traffic: how receives name their source and tag", recv_names, 0),
    PP_PARAM_KEYED("tags", T, tags, PP_PARAM_UINT, 1, 256, 0,
                   "traffic: tags drawn from 0..tags-1 (derived)", NULL, D),
    PP_PARAM_KEYED("window", T, window, PP_PARAM_UINT, 1, 4096, 0,
                   "traffic: outstanding sends and receives per rank (derived)", NULL, D),
};
#undef T
#undef D
const size_t pp_traffic_param_count =
    sizeof pp_traffic_param_table / sizeof pp_traffic_param_table[0];
