/*
 * Loading plug-ins (prepost/proto.h: PP_PLUGIN_DECLARE, prepost_plugin_init). The plug-in's
 * undefined pp_* symbols resolve against the prepost executable, which exports its public API
 * (ENABLE_EXPORTS in tools/CMakeLists.txt): one copy of the registry and the engine.
 */
#define _POSIX_C_SOURCE 200809L
#include "plugin.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prepost/proto.h"

#define MAX_PLUGINS 16

static char *paths[MAX_PLUGINS];
static char *names[MAX_PLUGINS]; /* file names: what the registry and trace headers keep */
static size_t nplugins;

static enum pp_status host_register(const struct pp_plugin_host *h, const struct pp_proto_def *d,
                                    char *err, size_t errlen)
{
  return pp_proto_register_from(d, h->plugin, err, errlen);
}

static const char *base_name(const char *path)
{
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

int pp_plugin_load(const char *path, char *err, size_t errlen)
{
  for (size_t i = 0; i < nplugins; i++)
    if (!strcmp(paths[i], path))
      return 0; /* loaded already */
  if (nplugins == MAX_PLUGINS) {
    snprintf(err, errlen, "plug-in %s: at most %d plug-ins", path, MAX_PLUGINS);
    return -1;
  }
  /* a name without a slash would be searched in the library path: a plug-in is a file */
  char *full = strchr(path, '/') ? strdup(path) : malloc(strlen(path) + 3);
  if (full && !strchr(path, '/'))
    sprintf(full, "./%s", path);
  char *name = strdup(base_name(path));
  if (!full || !name) {
    free(full), free(name);
    snprintf(err, errlen, "plug-in %s: out of memory", path);
    return -1;
  }
  void *h = dlopen(full, RTLD_NOW | RTLD_LOCAL);
  const char *fail = NULL;
  bool inited = false;
  char why[512] = "";
  if (!h) {
    snprintf(why, sizeof why, "cannot load plug-in %s: %s", path, dlerror());
    goto out;
  }
  const uint32_t *abi = dlsym(h, "prepost_plugin_abi");
  pp_plugin_init_fn init;
  *(void **)&init = dlsym(h, "prepost_plugin_init");
  if (!abi || !init) {
    fail = !abi ? "prepost_plugin_abi (PP_PLUGIN_DECLARE)" : "prepost_plugin_init";
    snprintf(why, sizeof why, "plug-in %s is not a prepost plug-in: it defines no %s", path, fail);
    goto out;
  }
  if (*abi != PP_PROTO_ABI) {
    snprintf(why, sizeof why, "plug-in %s was built against prepost's plug-in ABI %u, this "
             "prepost has ABI %u: rebuild it against this version's headers", path, *abi,
             PP_PROTO_ABI);
    goto out;
  }
  char ierr[256] = "";
  struct pp_plugin_host host = {.abi = PP_PROTO_ABI,
                                .plugin = name,
                                .register_protocol = host_register,
                                .err = ierr,
                                .errlen = sizeof ierr};
  int rc = init(&host);
  inited = true;
  if (rc != 0) {
    snprintf(why, sizeof why, "plug-in %s: its prepost_plugin_init failed (%d)%s%s", path, rc,
             ierr[0] ? ": " : "", ierr);
    goto out;
  }
  paths[nplugins] = full;
  names[nplugins++] = name;
  return 0;
out:
  /* a plug-in whose init failed stays loaded: it may have registered a def before failing */
  if (h && !inited)
    dlclose(h);
  free(full);
  free(name);
  snprintf(err, errlen, "%s", why);
  return -1;
}

int pp_plugins_from_args(int *argc, char **argv, char *err, size_t errlen)
{
  const char *env = getenv("PREPOST_PLUGINS");
  if (env && *env) {
    char *list = strdup(env), *save = NULL;
    if (!list) {
      snprintf(err, errlen, "out of memory");
      return -1;
    }
    for (char *p = strtok_r(list, ":", &save); p; p = strtok_r(NULL, ":", &save))
      if (pp_plugin_load(p, err, errlen)) {
        free(list);
        return -1;
      }
    free(list);
  }
  int out = 1;
  for (int i = 1; i < *argc; i++) {
    const char *a = argv[i], *path = NULL;
    if (!strcmp(a, "--")) { /* the rest are operands */
      while (i < *argc)
        argv[out++] = argv[i++];
      break;
    }
    if (!strcmp(a, "--plugin")) {
      if (i + 1 >= *argc) {
        snprintf(err, errlen, "--plugin needs a value (the path of a plug-in)");
        return -1;
      }
      path = argv[++i];
    } else if (!strncmp(a, "--plugin=", 9)) {
      path = a + 9;
    } else {
      argv[out++] = argv[i];
      continue;
    }
    if (!*path) {
      snprintf(err, errlen, "--plugin needs a value (the path of a plug-in)");
      return -1;
    }
    if (pp_plugin_load(path, err, errlen))
      return -1;
  }
  *argc = out;
  argv[out] = NULL;
  return 0;
}

size_t pp_plugin_count(void)
{
  return nplugins;
}

const char *pp_plugin_path(size_t i)
{
  return i < nplugins ? paths[i] : NULL;
}
