/*
 * The two encodings of `prepost trace export --perfetto`: Chrome's trace event JSON and
 * Perfetto's own protobuf trace format (protos/perfetto/trace/trace_packet.proto: TracePacket
 * with TrackDescriptor and TrackEvent), written by hand with a varint encoder. The exporter
 * says what happens (a rank, a QP, a work request's slice, a counter, a message with its arrow)
 * and this layer writes it in one encoding or the other.
 *
 * Protobuf mapping: a rank is a process track (pid = rank + 1), a QP a thread track, a counter a
 * counter track of its process; the work requests of one queue, which overlap without nesting,
 * go on "lanes", child tracks of the QP's, each WR on the lowest lane free at its post (slices
 * on one track must nest); a message is an instant at each end joined by a flow.
 */
#ifndef PP_EXPORT_PERFETTO_OUT_H
#define PP_EXPORT_PERFETTO_OUT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct pf_out;

/* One argument of an event: a number, or a string when s is not NULL. */
struct pf_arg {
  const char *key;
  const char *s;
  uint64_t u;
};

/* NULL when out of memory. */
struct pf_out *pf_open(FILE *o, bool proto, const char *scenario);
/* Ends the file (JSON: the metadata object given as text, or NULL) and frees; -1 when writing
 * failed or memory ran out at some point. */
int pf_close(struct pf_out *w, const char *json_metadata);

void pf_process(struct pf_out *w, uint32_t pid, const char *name, uint32_t sort);
void pf_thread(struct pf_out *w, uint32_t pid, uint32_t tid, const char *name);
/* An async slice (JSON "b"/"e" with an id); *lane is where its end must go (protobuf). */
void pf_begin(struct pf_out *w, uint32_t pid, uint32_t tid, const char *cat, const char *name,
              uint64_t id, uint64_t ts, const struct pf_arg *a, int na, uint32_t *lane);
void pf_end(struct pf_out *w, uint32_t pid, uint32_t tid, const char *cat, const char *name,
            uint64_t id, uint64_t ts, const struct pf_arg *a, int na, uint32_t lane);
void pf_instant(struct pf_out *w, uint32_t pid, uint32_t tid, const char *name, uint64_t ts,
                const struct pf_arg *a, int na);
/* Counter `name` of process pid, its series keys[i] at vals[i] (JSON: one event; protobuf: a
 * counter track per series). */
void pf_counter(struct pf_out *w, uint32_t pid, const char *name, const char *const *keys,
                const int64_t *vals, int n, uint64_t ts);
/* A 1 ns mark where a message leaves (flow id > 0 starts an arrow) or arrives (ends it). */
void pf_mark(struct pf_out *w, uint32_t pid, uint32_t tid, const char *cat, const char *name,
             uint64_t ts, uint64_t flow, bool arrives, const struct pf_arg *a, int na);

#endif
