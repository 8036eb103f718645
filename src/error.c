/* Result codes as text, and the optional detail of a failed call. */
#define _GNU_SOURCE
#include "error.h"

#include <string.h>

const char *fsafe_strerror(int code)
{
	if (code == FSAFE_ENOTDURABLE)
		return "published, but not synced: durability unknown";
	if (code == FSAFE_ECONFLICT)
		return "version conflict: changed since it was read";
	if (code == 0)
		return "Success";
	if (code > 0) /* a positive errno, as fsafe_error.sys_errno holds it */
		code = -code;
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 32)
	/* Thread-safe, and never writes a shared buffer. */
	const char *s = strerrordesc_np(-code);
	return s ? s : "Unknown error";
#else
	return strerror(-code);
#endif
}

void fsafe__error_set(struct fsafe_error *e, int code, int sys_errno,
                      const char *step, bool published)
{
	if (!e)
		return;
	e->code = code;
	e->sys_errno = sys_errno;
	e->step = step;
	e->published = published;
}
