/*
 * Options structs and size-tagged out structs: the one place that knows
 * how a struct of the caller's layout maps onto the library's.
 *
 * Every such struct begins with `size_t size`. The caller's struct may be
 * the first published layout (its size is the struct's *_SIZE_V0, and a
 * size of 0 means that), today's, or a later, larger one. The rule is the
 * kernel's for struct open_how: bytes we do not know are accepted only when
 * they are zero, since a non-zero one asks for something we cannot do.
 */
#ifndef FSAFE_OPTS_H
#define FSAFE_OPTS_H

#include <stddef.h>

/*
 * Copy the caller's options `in` (may be NULL: all defaults) into `out`,
 * our layout of `out_size` bytes, zero-filled first, so a field the
 * caller's layout lacks reads as 0, its default. 0; -EINVAL when the
 * caller's size is below `v0`; -E2BIG when a byte past our layout is not
 * zero.
 */
int fsafe__opts_copy(void *out, size_t out_size, const void *in, size_t v0);

#define FSAFE__OPTS_COPY(out, in, v0) \
	fsafe__opts_copy((out), sizeof(*(out)), (in), (v0))

/*
 * Copy our result `in` (of `in_size` bytes, `size` member included) into
 * the caller's struct `out`, whose `size` says how much of it there is:
 * the bytes the caller's layout shares with ours, and zeros past ours.
 * 0; -EINVAL when the caller's size is below `v0` (0 counts as `v0`).
 */
int fsafe__opts_copy_out(void *out, const void *in, size_t in_size, size_t v0);

#define FSAFE__OPTS_COPY_OUT(out, in, v0) \
	fsafe__opts_copy_out((out), (in), sizeof(*(in)), (v0))

/*
 * The `error` member (at `offset`, inside V0) of the caller's options that
 * FSAFE__OPTS_COPY refused with -E2BIG, so that the refusal can still be
 * reported through it (fsafe.h, "Error detail"); NULL for any other
 * result, when the caller's struct may not reach that far.
 */
struct fsafe_error *fsafe__opts_error(const void *in, size_t offset, int r);

#define FSAFE__OPTS_ERROR(in, type, r) \
	fsafe__opts_error((in), offsetof(type, error), (r))

#endif
