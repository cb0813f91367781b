/* The trace parser's fuzz target, shared by the libFuzzer harness (tests/fuzz/fuzz_trace.c with
 * -DPP_LIBFUZZER) and the deterministic corpus replay (tests/test_trace_fuzz.c). */
#ifndef PP_FUZZ_TRACE_H
#define PP_FUZZ_TRACE_H

#include <stddef.h>
#include <stdint.h>

/* Parses data as a trace (the first byte picks the mode: bit 0 recompute every chunk's CRC so
 * that mutations reach the record decoder, bit 1 partial mode), then decodes, formats and
 * replays nothing: every record, the header keys, the engine configuration. Returns the number
 * of records read (-1: refused). Must never crash, leak or read out of bounds. */
int pp_fuzz_trace_one(const uint8_t *data, size_t size);

#endif
