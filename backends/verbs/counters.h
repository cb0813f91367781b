/*
 * The device's counters, per driver: which sysfs files of a port
 * (/sys/class/infiniband/DEV/ports/PORT/...) feed which prepost/nic.h counter, for rxe (Soft-RoCE,
 * drivers/infiniband/sw/rxe/rxe_hw_counters.c) and mlx5 (ConnectX, the q-counters of
 * drivers/infiniband/hw/mlx5/counters.c), documented in backends/verbs/README.md. A driver is
 * told by a file only it has; an unknown driver, or a counter whose file is absent, is marked
 * missing in pp_nic_counters (JSON null, "counter not available"), never read as 0.
 * No ibverbs here: the root directory is a parameter, so tests run it on a fake sysfs tree.
 */
#ifndef PP_VERBS_COUNTERS_H
#define PP_VERBS_COUNTERS_H

#include <stdbool.h>
#include <stdint.h>

#include "prepost/nic.h"

#define VNIC_SYSFS_ROOT "/sys/class/infiniband"
#define VNIC_RAW_MAX 16 /* counters read per driver */

struct vnic_driver; /* a row of the table in counters.c */

/* The driver of DEV's port under root (NULL: unknown, or no counters at all). */
const struct vnic_driver *vnic_driver_of(const char *root, const char *dev, int port);
const char *vnic_driver_name(const struct vnic_driver *d); /* "rxe", "mlx5"; "unknown" for NULL */
/* The counter files the driver's table reads (at most VNIC_RAW_MAX), e.g.
 * "hw_counters/rnr_nak_retry_err"; 0 for NULL. */
unsigned vnic_driver_nraw(const struct vnic_driver *d);
const char *vnic_driver_raw(const struct vnic_driver *d, unsigned i);

/* One reading of a driver's counter files. */
struct vnic_raw {
  uint64_t v[VNIC_RAW_MAX];
  bool have[VNIC_RAW_MAX]; /* the file exists and holds a number */
};
void vnic_raw_read(const char *root, const char *dev, int port, const struct vnic_driver *d,
                   struct vnic_raw *out);

/* The engine's counters between two readings (now - mark; a counter that went down reads 0), by
 * the driver's table; d NULL or a file absent in either reading: marked missing. */
void vnic_counters_map(const struct vnic_driver *d, const struct vnic_raw *now,
                       const struct vnic_raw *mark, struct pp_nic_counters *out);

#endif
