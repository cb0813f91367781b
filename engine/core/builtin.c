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
    pp_collective_def;

#define CFG(member) offsetof(struct pp_engine_cfg, member)

void pp_builtin_register(void)
{
  unsigned s = PP_OK;
  /* registry ids = enum pp_protocol */
  s |= pp_proto_register_builtin(&pp_naive_def, CFG(proto_params));
  s |= pp_proto_register_builtin(&pp_p2p_eager_def, CFG(p2p));
  s |= pp_proto_register_builtin(&pp_p2p_rndv_def, CFG(p2p));
  s |= pp_proto_register_builtin(&pp_ring_credits_def, CFG(ring));
  s |= pp_proto_register_builtin(&pp_ring_cts_def, CFG(ring));
  /* kinds = enum pp_workload_kind */
  s |= pp_workload_register(&pp_stream_def, NULL, 0);
  s |= pp_workload_register(&pp_script_def, NULL, 0);
  s |= pp_workload_register(&pp_traffic_def, NULL, 0);
  s |= pp_workload_register(&pp_app_def, NULL, 0);
  s |= pp_workload_register(&pp_collective_def, NULL, 0);
  assert(s == PP_OK); /* the built-ins' defs are well formed (tests/test_registry.c) */
  (void)s;
}
