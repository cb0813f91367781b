/* A plug-in built against another plug-in ABI: refused before its init runs. */
#include <stdint.h>

#include <prepost/proto.h>

__attribute__((visibility("default"))) const uint32_t prepost_plugin_abi = PP_PROTO_ABI + 1;

__attribute__((visibility("default"))) int prepost_plugin_init(const struct pp_plugin_host *h);

int prepost_plugin_init(const struct pp_plugin_host *h)
{
  (void)h;
  return 0;
}
