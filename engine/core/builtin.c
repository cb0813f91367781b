/*
 * The built-in protocols and workloads: one registration line each, in the order of their ids
 * (enum pp_protocol, enum pp_workload_kind in prepost/engine.h). A new protocol is its folder
 * (engine/proto/NAME/) and one line here; a plug-in needs neither (prepost/proto.h).
 */
#include <assert.h>
#include <stddef.h>

#include "engine/core/engine_impl.h"

extern const struct pp_proto_def pp_naive_def;                          /* naive.c */
extern const struct pp_proto_def pp_p2p_eager_def, pp_p2p_rndv_def;     /* proto/p2p/def.c */
extern const struct pp_proto_def pp_ring_credits_def, pp_ring_cts_def; /* ring.c */
extern const struct pp_workload_def pp_stream_def, pp_script_def, pp_traffic_def, pp_app_def,
    pp_collective_def, pp_pingpong_def;

static void p2p_defaults(void *p)
{
  pp_p2p_params_default(p);
}

static void ring_defaults(void *p)
{
  pp_ring_params_default(p);
}

void pp_builtin_register(void)
{
  unsigned s = PP_OK;
  /* registry ids = enum pp_protocol */
  s |= pp_proto_register_builtin(&pp_naive_def, NULL);
  s |= pp_proto_register_builtin(&pp_p2p_eager_def, p2p_defaults);
  s |= pp_proto_register_builtin(&pp_p2p_rndv_def, p2p_defaults);
  s |= pp_proto_register_builtin(&pp_ring_credits_def, ring_defaults);
  s |= pp_proto_register_builtin(&pp_ring_cts_def, ring_defaults);
  /* kinds = enum pp_workload_kind */
  s |= pp_workload_register(&pp_stream_def, NULL, 0);
  s |= pp_workload_register(&pp_script_def, NULL, 0);
  s |= pp_workload_register(&pp_traffic_def, NULL, 0);
  s |= pp_workload_register(&pp_app_def, NULL, 0);
  s |= pp_workload_register(&pp_collective_def, NULL, 0);
  s |= pp_workload_register(&pp_pingpong_def, NULL, 0);
  assert(s == PP_OK); /* the built-ins' defs are well formed (tests/test_registry.c) */
  (void)s;
}
