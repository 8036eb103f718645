/*
 * A file's identity as a caller read it (fsafe_token_get), for the
 * conditional replace: device, inode, size, change time.
 */
#ifndef FSAFE_TOKEN_H
#define FSAFE_TOKEN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

struct fsafe__token {
	uint64_t dev, ino, size, ctime_sec;
	uint32_t ctime_nsec;
};

void fsafe__token_of(const struct stat *st, struct fsafe__token *t);
/* -EINVAL unless `text` is exactly a token as fsafe_token_get writes it. */
int fsafe__token_parse(const char *text, struct fsafe__token *t);
bool fsafe__token_matches(const struct fsafe__token *t, const struct stat *st);

#endif
