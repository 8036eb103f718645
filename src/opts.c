/* The size rule of options and out structs (see opts.h). */
#include "opts.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

/* The caller's `size` member, read without assuming its alignment. */
static size_t caller_size(const void *s, size_t v0)
{
	size_t n;

	memcpy(&n, s, sizeof(n));
	return n ? n : v0;
}

int fsafe__opts_copy(void *out, size_t out_size, const void *in, size_t v0)
{
	memset(out, 0, out_size);
	if (!in)
		return 0;

	size_t n = caller_size(in, v0);
	if (n < v0)
		return -EINVAL;
	for (size_t i = out_size; i < n; i++)
		if (((const uint8_t *)in)[i])
			return -E2BIG;
	memcpy(out, in, n < out_size ? n : out_size);
	return 0;
}

struct fsafe_error *fsafe__opts_error(const void *in, size_t offset, int r)
{
	struct fsafe_error *e = NULL;

	if (in && r == -E2BIG)
		memcpy(&e, (const uint8_t *)in + offset, sizeof(e));
	return e;
}

int fsafe__opts_copy_out(void *out, const void *in, size_t in_size, size_t v0)
{
	size_t n = caller_size(out, v0);

	if (n < v0)
		return -EINVAL;
	/* The caller's size member stays what the caller wrote. */
	size_t keep = sizeof(size_t);
	size_t common = n < in_size ? n : in_size;
	memcpy((uint8_t *)out + keep, (const uint8_t *)in + keep, common - keep);
	if (n > in_size)
		memset((uint8_t *)out + in_size, 0, n - in_size);
	return 0;
}
