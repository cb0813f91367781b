/*
 * A module's parameters, described once: a field table.
 *
 * Every protocol and workload (built in or a plug-in) describes the settings it owns with one
 * const array of struct pp_param: key, kind, bounds, default and a sentence of documentation,
 * and where the value lives in the module's own parameter struct (offset and width). The one
 * table feeds everything that reads or writes settings: the scenario parser, `--set KEY=VALUE`,
 * the trace header (keys and canonical values, not raw struct bytes), the explorer's scenario
 * writer and `help`. The value parsers below are the only ones the tools use, so a duration or a
 * size is spelled the same everywhere:
 *
 *   duration  "250ns", "2us", "1.5ms", "10s" (also "5min", "1h"); a bare integer is nanoseconds
 *             in a scenario (the command line's options want the unit: tools/cli/cli_util.h)
 *   size      "4096", "64B", "4KiB", "1MiB", "1GiB" (powers of 2), "4KB", "1MB", "1GB" (of 10)
 *   integer   decimal digits; no sign, no unit
 *   bool      true/false, yes/no, on/off, 1/0
 *   enum      one of the names the entry lists
 *   prob      a probability: a decimal number such as 0.05 or 1e-3 (a double member)
 *   ranks     a set of ranks 0..63 such as [1, 3] or 1,3 (a uint64_t bitmask member)
 *   bandwidth "100Gbps", "25GBps" (bytes/s), "94148362bps" or a bare number of bits/s, finite
 *             and > 0 (a double member, bits/s)
 *   composite a key whose value has its own shape (a list, a mapping, a file path, a string):
 *             no member; the section's own code parses it, the entry gives its name and doc
 *
 * Numbers read and write with a '.' whatever the program's LC_NUMERIC locale says.
 * Pure string handling: no I/O, no allocation (part of the engine library).
 */
#ifndef PP_PARAM_H
#define PP_PARAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif
PP_API_BEGIN

/* X(id, name) */
#define PP_PARAM_KIND_LIST(X)                                                  \
  X(UINT, "integer")                                                           \
  X(SIZE, "size")                                                              \
  X(DURATION, "duration")                                                      \
  X(BOOL, "bool")                                                              \
  X(ENUM, "enum")                                                              \
  X(PROB, "probability")                                                       \
  X(RANKS, "rank list")                                                        \
  X(BANDWIDTH, "bandwidth")                                                    \
  X(COMPOSITE, "composite")

enum pp_param_kind {
#define PP_X(id, name) PP_PARAM_##id,
  PP_PARAM_KIND_LIST(PP_X)
#undef PP_X
  PP_PARAM_KIND_COUNT
};
const char *pp_param_kind_name(enum pp_param_kind k); /* "?" when unknown */

struct pp_param {
  const char *key;  /* as written in a scenario section and after --set SECTION. */
  const char *doc;  /* one sentence */
  uint8_t kind;     /* enum pp_param_kind */
  uint8_t width;    /* bytes of the unsigned integer member: 1, 2, 4 or 8 (bool: 1) */
  uint8_t flags;    /* PP_PARAM_F_* */
  uint32_t offset;  /* of the member in the module's parameter struct */
  uint64_t min, max, def;     /* enum: indices into names; prob, bandwidth: the double's bits
                                 (for values >= 0 the bits order as the numbers:
                                 PP_PARAM_PROB_ONE, PP_PARAM_BW_MAX); composite: 0 */
  const char *const *names;   /* enum: names[min..max], NULL-free */
};

/* Flags. DERIVED: the default is 0, outside [min, max], and means "the module derives it" (the
 * doc says from what); a value that is given must be within [min, max]. */
#define PP_PARAM_F_DERIVED 1u
/* RANK: an integer that names a rank (of a UINT), or every rank of a RANKS set, must be below
 * the run's rank count, which the table does not know: pp_param_rank_bound() gives the entry
 * with that bound for the caller to parse with. */
#define PP_PARAM_F_RANK 2u

/* The bits of a probability bound (a double >= 0), as min, max and def of a PROB entry hold it:
 * PP_PARAM_PROB_ONE is 1.0, PP_PARAM_PROB_BELOW_ONE the largest double below 1 (p < 1). */
#define PP_PARAM_PROB_ONE 0x3ff0000000000000ull
#define PP_PARAM_PROB_BELOW_ONE 0x3fefffffffffffffull

/* The bits of a bandwidth bound or default (a double > 0, bits/s): PP_PARAM_BW_MIN the smallest
 * double > 0 (min: "> 0"), PP_PARAM_BW_MAX the largest finite one (max: "finite"),
 * PP_PARAM_BW_100G 100 Gb/s (100e9; tests/test_param.c checks each). */
#define PP_PARAM_BW_MIN 0x0000000000000001ull
#define PP_PARAM_BW_MAX 0x7fefffffffffffffull
#define PP_PARAM_BW_100G 0x42374876e8000000ull

/* An entry for member `m` of struct type `T` (an unsigned integer type, or bool), named key_. */
#define PP_PARAM_KEYED(key_, T, m, kind_, lo, hi, dflt, doc_, names_, flags_)  \
  {                                                                            \
    .key = (key_), .doc = (doc_), .kind = (kind_), .width = sizeof(((T *)0)->m), \
    .flags = (flags_), .offset = (uint32_t)offsetof(T, m), .min = (lo),        \
    .max = (hi), .def = (dflt), .names = (names_)                              \
  }
/* The same, named as the member. */
#define PP_PARAM_ENTRY(T, m, kind_, lo, hi, dflt, doc_, names_)                \
  PP_PARAM_KEYED(#m, T, m, kind_, lo, hi, dflt, doc_, names_, 0)
#define PP_PARAM_UINT(T, m, lo, hi, dflt, doc)                                 \
  PP_PARAM_ENTRY(T, m, PP_PARAM_UINT, lo, hi, dflt, doc, NULL)
#define PP_PARAM_SIZE(T, m, lo, hi, dflt, doc)                                 \
  PP_PARAM_ENTRY(T, m, PP_PARAM_SIZE, lo, hi, dflt, doc, NULL)
#define PP_PARAM_DURATION(T, m, lo, hi, dflt, doc)                             \
  PP_PARAM_ENTRY(T, m, PP_PARAM_DURATION, lo, hi, dflt, doc, NULL)
#define PP_PARAM_BOOL(T, m, dflt, doc)                                         \
  PP_PARAM_ENTRY(T, m, PP_PARAM_BOOL, 0, 1, dflt, doc, NULL)
/* `names` a const char *const[] array of count names; values 0..count-1 */
#define PP_PARAM_ENUM(T, m, names_, count, dflt, doc)                          \
  PP_PARAM_ENTRY(T, m, PP_PARAM_ENUM, 0, (count) - 1, dflt, doc, names_)

/* `m` a double in [0, max_bits] (PP_PARAM_PROB_ONE or PP_PARAM_PROB_BELOW_ONE), default 0 */
#define PP_PARAM_PROB_KEYED(key_, T, m, max_bits, doc_)                         \
  PP_PARAM_KEYED(key_, T, m, PP_PARAM_PROB, 0, max_bits, 0, doc_, NULL, 0)
/* `m` a uint64_t bitmask of ranks, default none */
#define PP_PARAM_RANKS_KEYED(key_, T, m, doc_)                                   \
  PP_PARAM_KEYED(key_, T, m, PP_PARAM_RANKS, 0, UINT64_MAX, 0, doc_, NULL, PP_PARAM_F_RANK)

/* `m` a double of bits/s, finite and > 0, default dflt_bits (PP_PARAM_BW_100G, ...) */
#define PP_PARAM_BANDWIDTH_KEYED(key_, T, m, dflt_bits, doc_)                  \
  PP_PARAM_KEYED(key_, T, m, PP_PARAM_BANDWIDTH, PP_PARAM_BW_MIN, PP_PARAM_BW_MAX, dflt_bits,   \
                 doc_, NULL, 0)
/* A key of a section whose value its own code parses (doc: its shape and meaning); no member:
 * pp_param_get reads 0, pp_param_put, pp_params_defaults and pp_params_check leave it alone,
 * pp_param_set refuses it. It names the key for the unknown-key check and `help keys`. */
#define PP_PARAM_COMPOSITE_KEYED(key_, doc_)                                   \
  {                                                                            \
    .key = (key_), .doc = (doc_), .kind = PP_PARAM_COMPOSITE, .width = 0, .flags = 0,           \
    .offset = 0, .min = 0, .max = 0, .def = 0, .names = NULL                   \
  }

/* ---- the value parsers: text [s, s + len) (leading and trailing blanks ignored) ----
 * PP_OK and *out; PP_PARSE when the text has not the shape, PP_INVALID when it is out of
 * [lo, hi]; then `why` (may be NULL) gets the tail of a sentence that follows the setting's
 * name: "must be a duration such as 500ns, 2us, 1.5ms or 10s (a bare integer is ns)". */
enum pp_status pp_parse_uint(const char *s, size_t len, uint64_t lo, uint64_t hi, uint64_t *out,
                             char *why, size_t whylen);
enum pp_status pp_parse_size(const char *s, size_t len, uint64_t lo, uint64_t hi, uint64_t *out,
                             char *why, size_t whylen);
enum pp_status pp_parse_duration(const char *s, size_t len, uint64_t lo, uint64_t hi,
                                 uint64_t *out, char *why, size_t whylen);
enum pp_status pp_parse_bool(const char *s, size_t len, bool *out, char *why, size_t whylen);
/* A probability in [0, hi] (hi 1.0 or below; "must be a number 0 <= p < 1" when hi < 1). */
enum pp_status pp_parse_prob(const char *s, size_t len, double hi, double *out, char *why,
                             size_t whylen);
/* A set of ranks below `ranks` (at most 64): "[1, 3]", "1, 3", "1" (not empty) as a bitmask. */
enum pp_status pp_parse_ranks(const char *s, size_t len, uint32_t ranks, uint64_t *out,
                              char *why, size_t whylen);

/* A bandwidth in bits/s within [lo, hi] (lo > 0; "must be a finite bandwidth > 0" when lo is
 * the smallest double above 0 and hi the largest finite one): "100Gbps", "1.5Tbps", "25GBps"
 * (bytes/s: times 8), "kbps"/"Kbps", "Mbps", "bps", or a bare decimal number of bits/s
 * ("1e11"). */
enum pp_status pp_parse_bandwidth(const char *s, size_t len, double lo, double hi, double *out,
                                  char *why, size_t whylen);

/* The canonical text of a value, which its parser reads back to the same value: sizes and
 * durations in the largest unit that divides them exactly ("64KiB", "1500ns", "2ms");
 * bandwidths in the largest bit unit of which they are a whole number below 2^53 ("100Gbps",
 * "94148362bps"), else as a bare number of bits/s with 17 digits.
 * snprintf-like: returns the length it wanted. */
size_t pp_format_size(uint64_t bytes, char *buf, size_t len);
size_t pp_format_duration(uint64_t ns, char *buf, size_t len);
size_t pp_format_bandwidth(double bps, char *buf, size_t len);

/* ---- field tables ---- */
/* The table of a module's section: `extern const struct pp_param NAME_param_table[]` and its
 * entry count (the built-in ones: qp, workload, traffic, p2p, ring, coll, nic, faults, limits,
 * cluster). */
#define PP_PARAM_TABLE(name)                                                   \
  extern const struct pp_param name##_param_table[];                           \
  extern const size_t name##_param_count
/* The entry named key (exact), or NULL. */
const struct pp_param *pp_param_find(const struct pp_param *t, size_t n, const char *key);
/* The member's value (enum: its index, bool: 0/1, prob and bandwidth: the double's bits,
 * composite: 0). */
uint64_t pp_param_get(const struct pp_param *p, const void *obj);
/* Stores v (no bounds check: pp_param_set and pp_params_check do that). */
void pp_param_put(const struct pp_param *p, void *obj, uint64_t v);
/* Parses text by the entry's kind, checks its bounds, stores it. Errors as the parsers':
 * "'KEY' must be ..." is the caller's to write (why holds "must be ..."). */
enum pp_status pp_param_set(const struct pp_param *p, void *obj, const char *text, size_t len,
                            char *why, size_t whylen);
/* The canonical text of the member's value (enum: its name). */
size_t pp_param_format(const struct pp_param *p, const void *obj, char *buf, size_t len);
/* The canonical text of the entry's default ("derived" for PP_PARAM_F_DERIVED). */
size_t pp_param_format_default(const struct pp_param *p, char *buf, size_t len);
/* Entry p with its rank bound for a run of `ranks` ranks (a PP_PARAM_F_RANK UINT: max at most
 * ranks - 1; a RANKS set: max the mask of ranks 0..min(ranks, 64) - 1); others unchanged. */
struct pp_param pp_param_rank_bound(const struct pp_param *p, uint32_t ranks);
/* Every member its default. */
void pp_params_defaults(const struct pp_param *t, size_t n, void *obj);
/* Every member within its bounds; else PP_INVALID and "KEY must be ..., got ..." in err. */
enum pp_status pp_params_check(const struct pp_param *t, size_t n, const void *obj, char *err,
                               size_t errlen);
/* A table is well formed: keys unique and non-empty, widths 1/2/4/8 (a probability or a
 * bandwidth: 8, a composite: 0 and no bounds) and min <= def <= max that fit the width, enums
 * with names. false with the first problem in err (for registries). */
bool pp_params_valid(const struct pp_param *t, size_t n, size_t obj_size, char *err,
                     size_t errlen);

PP_API_END
#ifdef __cplusplus
}
#endif

#endif
