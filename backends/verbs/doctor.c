/*
 * prepost doctor: what ibv_devinfo / ibstatus / `ulimit -l` tell by hand, with a verdict.
 * Works with no device, with no RDMA support in the kernel at all, and as non-root.
 */
#define _GNU_SOURCE
#include "doctor.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "counters.h"
#include "prepost/verbsnic.h"

/* The port's counters by its driver's names (counters.h), each value or "counter not
 * available". */
static void print_counters(FILE *out, const char *dev, int port)
{
  const struct vnic_driver *d = vnic_driver_of(VNIC_SYSFS_ROOT, dev, port);
  if (!d) {
    fprintf(out, "            hw_counters: unknown driver: counter not available (RNR NAK and "
                 "retry counts are null in reports)\n");
    return;
  }
  struct vnic_raw raw;
  vnic_raw_read(VNIC_SYSFS_ROOT, dev, port, d, &raw);
  fprintf(out, "            hw_counters (%s names; RNR NAKs and retries are counted from them):\n",
          vnic_driver_name(d));
  for (unsigned i = 0; i < vnic_driver_nraw(d); i++) {
    if (raw.have[i])
      fprintf(out, "              %-40s %" PRIu64 "\n", vnic_driver_raw(d, i), raw.v[i]);
    else
      fprintf(out, "              %-40s counter not available\n", vnic_driver_raw(d, i));
  }
}

static const char *phys_state(uint8_t s)
{
  static const char *const names[] = {"?",       "SLEEP",
                                      "POLLING", "DISABLED",
                                      "PORT_CONFIGURATION_TRAINING", "LINK_UP",
                                      "LINK_ERROR_RECOVERY", "PHY_TEST"};
  return s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

static const char *port_state(enum ibv_port_state s)
{
  static const char *const names[] = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"};
  return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

static const char *link_layer(uint8_t l)
{
  return l == IBV_LINK_LAYER_ETHERNET ? "Ethernet (RoCE)" : l == IBV_LINK_LAYER_INFINIBAND ? "InfiniBand" : "unknown";
}

static bool module_loaded(const char *name)
{
  char path[128];
  snprintf(path, sizeof(path), "/sys/module/%s", name);
  return access(path, F_OK) == 0;
}

static bool has_cap_ipc_lock(void)
{
  FILE *f = fopen("/proc/self/status", "r");
  if (!f)
    return false;
  char line[256];
  unsigned long long cap = 0;
  while (fgets(line, sizeof(line), f))
    if (sscanf(line, "CapEff: %llx", &cap) == 1)
      break;
  fclose(f);
  return (cap >> 14) & 1; /* CAP_IPC_LOCK */
}

static void netdev_of(const char *dev, int port, int index, char *buf, size_t len)
{
  char path[256];
  snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/gid_attrs/ndevs/%d", dev, port,
           index);
  buf[0] = '\0';
  FILE *f = fopen(path, "r");
  if (!f)
    return;
  if (fgets(buf, (int)len, f))
    buf[strcspn(buf, "\n")] = '\0';
  fclose(f);
}

struct verdict {
  int ready_ports;
  char first[160]; /* the port prepost would use, described */
  char problem[400];
};

static void note_problem(struct verdict *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note_problem(struct verdict *v, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  if (!v->problem[0])
    vsnprintf(v->problem, sizeof(v->problem), fmt, ap);
  va_end(ap);
}

/* Registers 1 MiB on the device: the registration test the memlock limit decides. */
static int try_register(struct ibv_context *ctx, char *why, size_t len)
{
  struct ibv_pd *pd = ibv_alloc_pd(ctx);
  if (!pd) {
    snprintf(why, len, "ibv_alloc_pd: %s", strerror(errno));
    return -1;
  }
  size_t sz = 1u << 20;
  void *buf = calloc(1, sz);
  struct ibv_mr *mr = buf ? ibv_reg_mr(pd, buf, sz,
                                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                           IBV_ACCESS_REMOTE_READ)
                          : NULL;
  int rc = 0;
  if (!mr) {
    snprintf(why, len, "ibv_reg_mr of 1 MiB: %s", buf ? strerror(errno) : "out of memory");
    rc = -1;
  } else {
    ibv_dereg_mr(mr);
  }
  free(buf);
  ibv_dealloc_pd(pd);
  return rc;
}

static void one_device(FILE *out, struct ibv_device *d, struct verdict *v)
{
  const char *name = ibv_get_device_name(d);
  struct ibv_context *ctx = ibv_open_device(d);
  if (!ctx) {
    fprintf(out, "device      %s: cannot open: %s\n", name, strerror(errno));
    note_problem(v, "cannot open %s: %s", name, strerror(errno));
    return;
  }
  struct ibv_device_attr da;
  if (ibv_query_device(ctx, &da)) {
    fprintf(out, "device      %s: ibv_query_device failed: %s\n", name, strerror(errno));
    ibv_close_device(ctx);
    return;
  }
  fprintf(out, "device      %s: %u port(s), fw %s, max %d QPs, %d CQEs/CQ, %d MRs, %d SRQs\n",
          name, da.phys_port_cnt, da.fw_ver[0] ? da.fw_ver : "-", da.max_qp, da.max_cqe,
          da.max_mr, da.max_srq);
  char reg_why[256] = "";
  int reg = try_register(ctx, reg_why, sizeof(reg_why));
  fprintf(out, "  memory    registration test (1 MiB MR): %s%s\n", reg ? "FAILED: " : "ok",
          reg ? reg_why : "");
  if (reg)
    note_problem(v, "%s: memory registration failed: %s", name, reg_why);
  for (int p = 1; p <= da.phys_port_cnt; p++) {
    struct ibv_port_attr pa;
    if (ibv_query_port(ctx, (uint8_t)p, &pa)) {
      fprintf(out, "  port %d    ibv_query_port failed: %s\n", p, strerror(errno));
      continue;
    }
    fprintf(out,
            "  port %d    state %s (%d), physical state %s (%d), link layer %s,\n"
            "            active MTU %u (max %u), lid %u, %d GID slot(s)\n",
            p, port_state(pa.state), pa.state, phys_state(pa.phys_state), pa.phys_state,
            link_layer(pa.link_layer), pp_mtu_bytes((enum pp_mtu)pa.active_mtu),
            pp_mtu_bytes((enum pp_mtu)pa.max_mtu), pa.lid, pa.gid_tbl_len);
    struct vnic_gid *g = calloc(pa.gid_tbl_len > 0 ? (size_t)pa.gid_tbl_len : 1, sizeof(*g));
    int k = 0;
    for (int i = 0; g && i < pa.gid_tbl_len; i++) {
      struct ibv_gid_entry e;
      if (ibv_query_gid_ex(ctx, (uint32_t)p, (uint32_t)i, &e, 0))
        continue;
      g[k].index = e.gid_index;
      memcpy(g[k].gid, e.gid.raw, 16);
      g[k].type = (int)e.gid_type;
      netdev_of(name, p, i, g[k].netdev, sizeof(g[k].netdev));
      k++;
    }
    int pick = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? vnic_pick_gid(g, k) : 0;
    if (k == 0)
      fprintf(out, "            GID table: empty%s\n",
              pa.link_layer == IBV_LINK_LAYER_ETHERNET
                  ? " (RoCE needs an IP address on the netdev under the device)"
                  : "");
    for (int i = 0; i < k; i++) {
      char s[64];
      vnic_gid_str(g[i].gid, s, sizeof(s));
      fprintf(out, "            GID %-3u %-40s %-8s %s%s\n", g[i].index, s,
              vnic_gid_type_name(g[i].type), g[i].netdev[0] ? g[i].netdev : "-",
              (int)g[i].index == pick ? "   <- prepost's default" : "");
    }
    print_counters(out, name, p);
    bool usable = pa.state == IBV_PORT_ACTIVE &&
                  (pa.link_layer != IBV_LINK_LAYER_ETHERNET || k > 0) && !reg;
    if (usable) {
      if (!v->ready_ports++) {
        char s[64] = "";
        for (int i = 0; i < k; i++)
          if ((int)g[i].index == pick)
            vnic_gid_str(g[i].gid, s, sizeof(s));
        snprintf(v->first, sizeof(v->first), "%s port %d (%s, MTU %u%s%s)", name, p,
                 pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand",
                 pp_mtu_bytes((enum pp_mtu)pa.active_mtu), s[0] ? ", GID " : "", s);
      }
    } else if (pa.state != IBV_PORT_ACTIVE) {
      note_problem(v, "%s port %d is %s", name, p,
                   pa.state == IBV_PORT_DOWN ? "DOWN (no link: cable, switch, or the netdev is down)"
                                             : port_state(pa.state));
    } else if (k == 0) {
      note_problem(v, "%s port %d has no GID (no IP address on its netdev)", name, p);
    }
    free(g);
  }
  ibv_close_device(ctx);
}

int pp_verbs_doctor(FILE *out, const char *only_device)
{
  struct verdict v = {0};
  struct utsname u;
  uname(&u);
  fprintf(out, "prepost doctor: can this machine run the verbs backend?\n\n");
  fprintf(out, "kernel      %s %s; modules: ib_core %s, ib_uverbs %s, rdma_rxe %s\n", u.sysname,
          u.release, module_loaded("ib_core") ? "loaded" : "absent",
          module_loaded("ib_uverbs") ? "loaded" : "absent",
          module_loaded("rdma_rxe") ? "loaded" : "absent");
  struct rlimit rl;
  getrlimit(RLIMIT_MEMLOCK, &rl);
  bool cap = has_cap_ipc_lock();
  bool unlimited = rl.rlim_cur == RLIM_INFINITY;
  char lim[64];
  if (unlimited)
    snprintf(lim, sizeof(lim), "unlimited");
  else
    snprintf(lim, sizeof(lim), "%llu KiB", (unsigned long long)rl.rlim_cur / 1024);
  bool memlock_low = !unlimited && !cap && rl.rlim_cur < (64ull << 20);
  fprintf(out, "memlock     ulimit -l: %s; CAP_IPC_LOCK: %s -> %s\n", lim, cap ? "yes" : "no",
          unlimited || cap ? "registration is not limited"
          : memlock_low    ? "registration limited to this much pinned memory (raise it: "
                             "`ulimit -l unlimited` or limits.conf)"
                           : "enough for prepost's buffers");
  int num = 0;
  errno = 0;
  struct ibv_device **list = ibv_get_device_list(&num);
  int e = errno;
  int shown = 0;
  if (!list || num == 0) {
    fprintf(out, "devices     none: ibv_get_device_list found no RDMA device%s%s%s\n",
            e ? " (" : "", e ? strerror(e) : "", e ? ")" : "");
  }
  for (int i = 0; list && i < num; i++) {
    if (only_device && only_device[0] && strcmp(only_device, ibv_get_device_name(list[i])))
      continue;
    one_device(out, list[i], &v);
    shown++;
  }
  if (list && num > 0 && only_device && only_device[0] && !shown)
    note_problem(&v, "no RDMA device named '%s'", only_device);
  if (list)
    ibv_free_device_list(list);
  fprintf(out, "\n");
  if (!num || !list) {
    fprintf(out,
            "verdict     NO DEVICE: no RDMA device on this machine%s. For Soft-RoCE: "
            "`modprobe rdma_rxe; rdma link add rxe0 type rxe netdev IFACE` (kernel with "
            "CONFIG_RDMA_RXE), or run the tests in the guest: tools/guest/run.\n",
            module_loaded("ib_uverbs") ? "" : " (ib_uverbs is not loaded: no RDMA in this kernel?)");
    return 1;
  }
  if (v.ready_ports == 0) {
    fprintf(out, "verdict     NOT READY: %s.\n", v.problem[0] ? v.problem : "no usable port");
    return 1;
  }
  if (memlock_low) {
    fprintf(out, "verdict     READY WITH A WARNING: %s; the memlock limit (%s) caps registered memory.\n",
            v.first, lim);
    return 0;
  }
  fprintf(out, "verdict     READY: %s%s%s.\n", v.first, v.problem[0] ? "; note: " : "", v.problem);
  return 0;
}
