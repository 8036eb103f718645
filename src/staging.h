/* The staging-name form: the only place in the tree that spells it. */
#ifndef FSAFE_STAGING_H
#define FSAFE_STAGING_H

#include <stdint.h>

#include "fsafe.h"

/* Random bytes one staging name carries (96 bits: 24 hex digits). */
#define FSAFE__STAGING_RANDOM_BYTES 12

/* Format a staging name from `rnd` into `out` (FSAFE_STAGING_NAME_LEN + 1
   bytes). Pure: the caller supplies the randomness. */
void fsafe__staging_format(const uint8_t rnd[FSAFE__STAGING_RANDOM_BYTES],
                           char out[FSAFE_STAGING_NAME_LEN + 1]);

#endif
