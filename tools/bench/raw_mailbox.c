/*
 * raw_mailbox: the bare SimGrid mailbox put/get message rate, as a yardstick for prepost.
 *
 *   raw_mailbox [SimGrid options] HOSTS [MESSAGES_PER_HOST]
 *
 * Generates a cluster of HOSTS hosts (100Gbps, 1us links; CM02 network model, no cross-traffic).
 * Host i runs a sender actor that puts MESSAGES_PER_HOST messages of 64 simulated bytes into the
 * mailbox of host (i+1) % HOSTS, and a receiver actor that gets as many from its own mailbox.
 * Prints one line:
 *
 *   raw_mailbox hosts=N messages=TOTAL wall_s=X msgs_per_s=Y sim_time_s=Z
 *
 * where wall_s is the wall-clock time of simgrid_run() alone (platform setup excluded).
 */
#define _GNU_SOURCE /* mkstemps */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <simgrid/actor.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/mailbox.h>
#include <xbt/config.h>
#include <xbt/log.h>

#define MSG_SIZE 64L
#define MAX_HOSTS 4096L
#define DEFAULT_MESSAGES 10000L

static long g_messages;  /* per sender */
static long g_received;  /* over every receiver */
static char g_payload;   /* what every message carries (its address) */

static void mailbox_name(char *buf, size_t len, long host)
{
  snprintf(buf, len, "mb%ld", host);
}

/* argv[1]: destination host index */
static void sender(int argc, char *argv[])
{
  (void)argc;
  char name[32];
  mailbox_name(name, sizeof name, strtol(argv[1], NULL, 10));
  sg_mailbox_t mb = sg_mailbox_by_name(name);
  for (long i = 0; i < g_messages; i++)
    sg_mailbox_put(mb, &g_payload, MSG_SIZE);
}

/* argv[1]: own host index */
static void receiver(int argc, char *argv[])
{
  (void)argc;
  char name[32];
  mailbox_name(name, sizeof name, strtol(argv[1], NULL, 10));
  sg_mailbox_t mb = sg_mailbox_by_name(name);
  for (long i = 0; i < g_messages; i++) {
    if (sg_mailbox_get(mb) == &g_payload)
      g_received++;
  }
}

static int parse_long(const char *s, long min, long max, long *out)
{
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
    return -1;
  *out = v;
  return 0;
}

/* Writes the cluster platform into a temporary file; returns its path (static buffer) or NULL. */
static const char *write_platform(long hosts)
{
  static char path[] = "/tmp/raw_mailbox-XXXXXX.xml";
  int fd = mkstemps(path, 4);
  if (fd < 0)
    return NULL;
  FILE *f = fdopen(fd, "w");
  if (f == NULL) {
    close(fd);
    unlink(path);
    return NULL;
  }
  fprintf(f,
          "<?xml version='1.0'?>\n"
          "<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
          "<platform version=\"4.1\">\n"
          "  <cluster id=\"bench\" prefix=\"h\" suffix=\"\" radical=\"0-%ld\"\n"
          "           speed=\"1Gf\" bw=\"100Gbps\" lat=\"1us\"/>\n"
          "</platform>\n",
          hosts - 1);
  if (fclose(f) != 0) {
    unlink(path);
    return NULL;
  }
  return path;
}

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char *argv[])
{
  xbt_log_control_set("root.thresh:warning"); /* no "Configuration change" chatter */
  simgrid_init(&argc, argv);                  /* consumes --cfg=... and --log=... */

  long hosts, messages = DEFAULT_MESSAGES;
  if (argc < 2 || argc > 3 || parse_long(argv[1], 1, MAX_HOSTS, &hosts) != 0 ||
      (argc == 3 && parse_long(argv[2], 1, 100000000L, &messages) != 0)) {
    fprintf(stderr,
            "usage: %s [SimGrid options] HOSTS [MESSAGES_PER_HOST]\n"
            "  HOSTS 1..%ld; MESSAGES_PER_HOST defaults to %ld\n",
            argv[0], MAX_HOSTS, DEFAULT_MESSAGES);
    return 2;
  }
  g_messages = messages;

  /* Before the platform exists: the network model is chosen when the platform is loaded. */
  sg_cfg_set_string("network/model", "CM02");
  sg_cfg_set_boolean("network/crosstraffic", "no");

  const char *platform = write_platform(hosts);
  if (platform == NULL) {
    fprintf(stderr, "raw_mailbox: cannot write the platform file: %s\n", strerror(errno));
    return 1;
  }
  simgrid_load_platform(platform);
  unlink(platform);

  for (long i = 0; i < hosts; i++) {
    char hname[32], self[24], dest[24];
    snprintf(hname, sizeof hname, "h%ld", i);
    snprintf(self, sizeof self, "%ld", i);
    snprintf(dest, sizeof dest, "%ld", (i + 1) % hosts);
    sg_host_t h = sg_host_by_name(hname);
    if (h == NULL) {
      fprintf(stderr, "raw_mailbox: host %s missing from the generated platform\n", hname);
      return 1;
    }
    char *rargv[] = {"receiver", self, NULL};
    char *sargv[] = {"sender", dest, NULL};
    sg_actor_create("receiver", h, receiver, 2, rargv);
    sg_actor_create("sender", h, sender, 2, sargv);
  }

  double t0 = now_s();
  simgrid_run();
  double wall = now_s() - t0;

  long total = hosts * messages;
  if (g_received != total) {
    fprintf(stderr, "raw_mailbox: received %ld messages, expected %ld\n", g_received, total);
    return 1;
  }
  printf("raw_mailbox hosts=%ld messages=%ld wall_s=%.3f msgs_per_s=%.0f sim_time_s=%.6f\n", hosts,
         total, wall, wall > 0 ? (double)total / wall : 0.0, simgrid_get_clock());
  return 0;
}
