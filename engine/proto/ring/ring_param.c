/* Field table of the ring protocols' section `ring` (struct pp_ring_params, prepost/ring.h);
 * the defaults are pp_ring_params_default()'s (tests/test_param.c checks). */
#include "prepost/param.h"
#include "prepost/engine.h"
#include "prepost/ring.h"

#define R struct pp_ring_params
const struct pp_param pp_ring_param_table[] = {
    PP_PARAM_UINT(R, slots, 1, PP_RING_MAX_SLOTS, PP_RING_DEFAULT_SLOTS,
                  "slots per channel (NCCL_STEPS is 8)"),
    PP_PARAM_SIZE(R, slot_size, 1, PP_RING_MAX_SLOT_SIZE, PP_RING_DEFAULT_SLOT_SIZE,
                  "bytes per slot"),
    PP_PARAM_UINT(R, channels, 1, PP_MAX_CHANNELS, 1,
                  "QPs per connection; chunks are striped over them"),
    PP_PARAM_UINT(R, credit_batch, 1, PP_RING_MAX_SLOTS, 1,
                  "credit goes back once this many released slots are unreturned"),
    PP_PARAM_KEYED("credit_idle", R, credit_idle_ns, PP_PARAM_DURATION, 0, UINT64_MAX, 0,
                   "or when the channel is idle: at once if 0, else at the latest this long "
                   "after the first unreturned release",
                   NULL, 0),
};
#undef R
const size_t pp_ring_param_count = sizeof pp_ring_param_table / sizeof pp_ring_param_table[0];
_Static_assert(sizeof pp_ring_param_table / sizeof pp_ring_param_table[0] == PP_RING_PARAM_COUNT,
               "PP_RING_PARAM_COUNT (prepost/ring.h) is the table's entry count");
