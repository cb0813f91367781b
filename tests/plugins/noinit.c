/* A plug-in that declares the ABI but defines no prepost_plugin_init: refused. */
#include <prepost/proto.h>

PP_PLUGIN_DECLARE("noinit");
