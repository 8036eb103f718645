/*
 * Internals of the checkpoint store shared with its tests: the names in
 * its directory.
 */
#ifndef FSAFE_CHECKPOINT_INTERNAL_H
#define FSAFE_CHECKPOINT_INTERNAL_H

#include "sha256.h"

/* Names in a checkpoint directory. */
#define FSAFE__CKPT_CURRENT "CURRENT"
#define FSAFE__CKPT_LOG "events.log"
#define FSAFE__CKPT_LOCK "LOCK"
#define FSAFE__CKPT_MARKER "OPEN"
#define FSAFE__CKPT_MANIFEST ".manifest"
#define FSAFE__CKPT_QUARANTINE "quarantine"
#define FSAFE__CKPT_GEN_DIGITS 12

#endif
