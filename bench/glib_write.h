/*
 * The GLib peer as the paired drivers call it: g_file_set_contents_full
 * with CONSISTENT | DURABLE (temp file synced, renamed, directory synced),
 * mode 0666. 0, or -EIO when GLib reports a failure.
 */
#ifndef FSAFE_BENCH_GLIB_WRITE_H
#define FSAFE_BENCH_GLIB_WRITE_H

#include <errno.h>
#include <glib.h>

static inline int glib_durable_write(const char *path, const void *buf,
                                     size_t len)
{
	return g_file_set_contents_full(path, buf, (gssize)len,
	                                G_FILE_SET_CONTENTS_CONSISTENT |
	                                        G_FILE_SET_CONTENTS_DURABLE,
	                                0666, NULL)
	               ? 0
	               : -EIO;
}

#endif
