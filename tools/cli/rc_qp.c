#include "tools/cli/rc_qp.h"

int pp_rc_qp_init(struct vnic *nic, uint32_t qpn, unsigned access)
{
  struct pp_qp_attr init = {.qp_state = PP_QPS_INIT, .qp_access_flags = access};
  return vnic_ops.modify_qp(nic, qpn, &init, PP_QP_STATE | PP_QP_ACCESS_FLAGS) == PP_OK ? 0 : -1;
}

int pp_rc_qp_connect(struct vnic *nic, uint32_t qpn, const struct pp_rc_attrs *a)
{
  struct pp_qp_attr rtr = {.qp_state = PP_QPS_RTR, .path_mtu = a->mtu, .dest_qp_num = a->dest_qpn,
                           .rq_psn = a->rq_psn, .max_dest_rd_atomic = a->max_dest_rd_atomic,
                           .min_rnr_timer = a->min_rnr_timer};
  struct pp_qp_attr rts = {.qp_state = PP_QPS_RTS, .sq_psn = a->sq_psn, .timeout = a->timeout,
                           .retry_cnt = a->retry_cnt, .rnr_retry = a->rnr_retry,
                           .max_rd_atomic = a->max_rd_atomic};
  if (vnic_ops.modify_qp(nic, qpn, &rtr,
                         PP_QP_STATE | PP_QP_PATH_MTU | PP_QP_DEST_QPN | PP_QP_RQ_PSN |
                             PP_QP_MAX_DEST_RD_ATOMIC | PP_QP_MIN_RNR_TIMER) != PP_OK)
    return -1;
  return vnic_ops.modify_qp(nic, qpn, &rts,
                            PP_QP_STATE | PP_QP_SQ_PSN | PP_QP_TIMEOUT | PP_QP_RETRY_CNT |
                                PP_QP_RNR_RETRY | PP_QP_MAX_QP_RD_ATOMIC) == PP_OK
             ? 0
             : -1;
}
