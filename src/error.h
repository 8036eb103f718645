#ifndef FSAFE_ERROR_H
#define FSAFE_ERROR_H

#include "fsafe.h"

/* Fill `e` (if not NULL). `sys_errno` is positive. */
void fsafe__error_set(struct fsafe_error *e, int code, int sys_errno,
                      const char *step, bool published);

#endif
