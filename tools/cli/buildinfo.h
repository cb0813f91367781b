/* What build this is: the version of the project (CMakeLists.txt) and the git commit of the
 * source tree it was built from (taken at build time by tools/cli/buildinfo.cmake: a rebuild after a
 * commit picks up the new one; "-dirty" when tracked files had changes; "unknown" outside a git
 * checkout). Failure files of the explorer and trace headers (prepost.commit) carry both. */
#ifndef PREPOST_TOOLS_BUILDINFO_H
#define PREPOST_TOOLS_BUILDINFO_H

const char *pp_build_version(void); /* "0.1.0" */
const char *pp_build_commit(void);  /* "98e0ef9a1b2c", "98e0ef9a1b2c-dirty", "unknown" */

#endif
