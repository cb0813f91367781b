/* prepost doctor: devices, ports, GID tables, memlock limit, and a verdict. */
#ifndef PP_DOCTOR_H
#define PP_DOCTOR_H

#include <stdio.h>

/* Prints the report; only_device (NULL or "") limits it to one device. Returns 0 when a port is
 * ready for the verbs backend, 1 otherwise (the last line says why). */
int pp_verbs_doctor(FILE *out, const char *only_device);

#endif
