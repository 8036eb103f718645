/*
 * Prints the size and field offsets of every struct the Python binding
 * declares with ctypes, as JSON, so its test compares them with the
 * compiler's instead of trusting a hand-written copy of the headers.
 */
#include <stddef.h>
#include <stdio.h>

#include "fsafe.h"

#define FIELD(T, f) printf("\"%s\": %zu, ", #f, offsetof(T, f))
#define END(T) printf("\"size\": %zu}", sizeof(T))

int main(void)
{
	printf("{\"Error\": {");
	FIELD(struct fsafe_error, code);
	FIELD(struct fsafe_error, sys_errno);
	FIELD(struct fsafe_error, step);
	FIELD(struct fsafe_error, published);
	END(struct fsafe_error);
	printf(", \"WriteOpts\": {");
	FIELD(struct fsafe_write_opts, flags);
	FIELD(struct fsafe_write_opts, mode);
	FIELD(struct fsafe_write_opts, error);
	FIELD(struct fsafe_write_opts, if_unchanged);
	END(struct fsafe_write_opts);
	printf(", \"LockOpts\": {");
	FIELD(struct fsafe_lock_opts, flags);
	FIELD(struct fsafe_lock_opts, timeout_ms);
	FIELD(struct fsafe_lock_opts, grace_ms);
	FIELD(struct fsafe_lock_opts, error);
	END(struct fsafe_lock_opts);
	printf(", \"StoreOpts\": {");
	FIELD(struct fsafe_store_opts, flags);
	FIELD(struct fsafe_store_opts, write_flags);
	FIELD(struct fsafe_store_opts, mode);
	FIELD(struct fsafe_store_opts, sweep_older_than_ms);
	FIELD(struct fsafe_store_opts, lock_timeout_ms);
	FIELD(struct fsafe_store_opts, error);
	END(struct fsafe_store_opts);
	printf(", \"StoreEntry\": {");
	FIELD(struct fsafe_store_entry, key);
	FIELD(struct fsafe_store_entry, keylen);
	FIELD(struct fsafe_store_entry, version);
	FIELD(struct fsafe_store_entry, len);
	END(struct fsafe_store_entry);
	printf(", \"CheckpointOpts\": {");
	FIELD(struct fsafe_checkpoint_opts, flags);
	FIELD(struct fsafe_checkpoint_opts, keep);
	FIELD(struct fsafe_checkpoint_opts, revision);
	FIELD(struct fsafe_checkpoint_opts, mode);
	FIELD(struct fsafe_checkpoint_opts, error);
	END(struct fsafe_checkpoint_opts);
	printf(", \"CheckpointLoadOpts\": {");
	FIELD(struct fsafe_checkpoint_load_opts, flags);
	FIELD(struct fsafe_checkpoint_load_opts, generation);
	FIELD(struct fsafe_checkpoint_load_opts, damage);
	END(struct fsafe_checkpoint_load_opts);
	printf(", \"CheckpointDamage\": {");
	FIELD(struct fsafe_checkpoint_damage, generation);
	FIELD(struct fsafe_checkpoint_damage, code);
	FIELD(struct fsafe_checkpoint_damage, file);
	END(struct fsafe_checkpoint_damage);
	printf(", \"CheckpointEvent\": {");
	FIELD(struct fsafe_checkpoint_event, time_ms);
	FIELD(struct fsafe_checkpoint_event, pid);
	FIELD(struct fsafe_checkpoint_event, kind);
	FIELD(struct fsafe_checkpoint_event, generation);
	END(struct fsafe_checkpoint_event);
	printf("}\n");
	return 0;
}
