/* The trace commands of the prepost CLI: `run --trace`, `trace dump|export|stats`, `replay`. */
#ifndef PP_TRACE_CLI_H
#define PP_TRACE_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "prepost/simrun.h"
#include "prepost/trace.h"

/* `prepost run --trace FILE`: opens FILE, writes the header for cfg and hands the writer to the
 * simulator (pp_sim_set_trace). Every packet with `packets` (--trace-packets), else only RNR
 * NAKs and NAKs (traces/FORMAT.md, trace.packets). NULL with a sentence in err on failure. */
struct pp_cli_trace;
struct pp_cli_trace *pp_cli_trace_start(const char *path, const struct pp_sim_config *cfg,
                                        const char *version, bool packets, char *err,
                                        size_t errlen);
/* The same with the caller's own header keys after the configuration's (str, else u). */
struct pp_cli_trace_key {
  const char *key;
  const char *str;
  uint64_t u;
};
struct pp_cli_trace *pp_cli_trace_start_keys(const char *path, const struct pp_sim_config *cfg,
                                             const char *version, bool packets,
                                             const struct pp_cli_trace_key *keys, size_t nkeys,
                                             char *err, size_t errlen);
/* Stores each line of text (without its newline) as a TEXT record of kind (enum
 * pp_trace_text_kind) of rank 0 at now, after the run's records: 0, or -1 with a sentence in err
 * (a line longer than PP_TRACE_TEXT_MAX). */
int pp_cli_trace_text(struct pp_cli_trace *t, uint64_t now, unsigned kind, const char *text,
                      char *err, size_t errlen);
/* Finishes the trace after pp_sim_run(); 0, or -1 with a sentence in err. Frees t. */
int pp_cli_trace_end(struct pp_cli_trace *t, char *err, size_t errlen);

/* Bytes of each received message's head a recording captures for this configuration (the
 * protocol's need, or PREPOST_TRACE_CAPTURE). */
uint32_t pp_cli_trace_capture(const struct pp_engine_cfg *c);
/* Merges traces with disjoint ranks (the verbs backend's per-rank files) into `out`: the first
 * part's header, every record ordered by time (pp_trace_merge). Parts cut short are read up to
 * their last complete chunk, with a note on `notes` (may be NULL). 0, or -1 with err. */
int pp_cli_trace_merge(const char *out, const char *const *parts, size_t n, FILE *notes,
                       char *err, size_t errlen);

int pp_cli_trace(int argc, char **argv);  /* prepost trace ... */
int pp_cli_replay(int argc, char **argv); /* prepost replay ... */
extern const char *const pp_trace_usage;
extern const char *const pp_replay_usage;

/* A trace file read into memory and opened. */
struct pp_trace_file {
  uint8_t *data;
  size_t size;
  struct pp_trace t;
};
/* 0, or -1 with "FILE: offset N: ..." in err. */
int pp_trace_file_load(const char *path, unsigned flags, struct pp_trace_file *f, char *err,
                       size_t errlen);
void pp_trace_file_free(struct pp_trace_file *f);

/* Exports (tools/export_*.c): 0, or -1 with a sentence in err. */
struct pp_export_opts {
  uint32_t snaplen;     /* pcap: bytes captured per packet, 0 = whole packet */
  uint64_t max_events;  /* svg: messages drawn at most; perfetto: events (0: no limit) */
  uint64_t from_ns, to_ns; /* perfetto: only what happens in [from_ns, to_ns) (to_ns 0: the end) */
  bool proto;              /* perfetto: Perfetto's protobuf trace format instead of JSON */
  uint64_t svg_ns_per_px;  /* svg: time to scale, this many ns per pixel (0: a row per event) */
};
/* 0 when the trace has every packet (trace.packets all), else -1 and what to record instead */
int pp_export_pcap_check(const struct pp_trace *t, char *err, size_t errlen);
/* What the capture will hold, computed before anything is written: the check above, every
 * packet record's count checked against its bytes (-1 and a sentence for a corrupt or forged
 * trace), the frames and an upper bound of the file's bytes. pp_export_pcap() calls it first. */
int pp_export_pcap_plan(const struct pp_trace *t, const struct pp_export_opts *o,
                        uint64_t *frames, uint64_t *bytes, char *err, size_t errlen);
int pp_export_pcap(const struct pp_trace *t, FILE *out, const struct pp_export_opts *o, char *err,
                   size_t errlen);
int pp_export_perfetto(const struct pp_trace *t, FILE *out, const struct pp_export_opts *o,
                       char *err, size_t errlen);
int pp_export_svg(const struct pp_trace *t, FILE *out, const struct pp_export_opts *o, char *err,
                  size_t errlen);

#endif
