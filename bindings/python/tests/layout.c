/*
 * Prints the size and field offsets of every struct the Python binding
 * declares with ctypes, as JSON, so its test compares them with the
 * compiler's instead of trusting a hand-written copy of the headers.
 */
#include <stddef.h>
#include <stdio.h>

#include "fsafe.h"

#define FIELD(T, f) printf("\"%s\": %zu, ", #f, offsetof(T, f))
#define END(T) printf("\"sizeof\": %zu}", sizeof(T))

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
	printf(", \"InboxOpts\": {");
	FIELD(struct fsafe_inbox_opts, flags);
	FIELD(struct fsafe_inbox_opts, max_message);
	FIELD(struct fsafe_inbox_opts, write_flags);
	FIELD(struct fsafe_inbox_opts, error);
	END(struct fsafe_inbox_opts);
	printf(", \"InboxEntry\": {");
	FIELD(struct fsafe_inbox_entry, name);
	FIELD(struct fsafe_inbox_entry, state);
	FIELD(struct fsafe_inbox_entry, dir);
	FIELD(struct fsafe_inbox_entry, consumer);
	FIELD(struct fsafe_inbox_entry, size);
	FIELD(struct fsafe_inbox_entry, problem);
	END(struct fsafe_inbox_entry);
	printf(", \"InboxRecovery\": {");
	FIELD(struct fsafe_inbox_recovery, returned);
	FIELD(struct fsafe_inbox_recovery, consumers);
	FIELD(struct fsafe_inbox_recovery, swept);
	FIELD(struct fsafe_inbox_recovery, unjudged);
	END(struct fsafe_inbox_recovery);
	printf(", \"SpoolOpts\": {");
	FIELD(struct fsafe_spool_opts, flags);
	FIELD(struct fsafe_spool_opts, segment_size);
	FIELD(struct fsafe_spool_opts, max_record);
	FIELD(struct fsafe_spool_opts, error);
	FIELD(struct fsafe_spool_opts, damage);
	FIELD(struct fsafe_spool_opts, damage_arg);
	END(struct fsafe_spool_opts);
	printf(", \"SpoolStat\": {");
	FIELD(struct fsafe_spool_stat, cursor);
	FIELD(struct fsafe_spool_stat, first_seq);
	FIELD(struct fsafe_spool_stat, next_seq);
	FIELD(struct fsafe_spool_stat, segments);
	FIELD(struct fsafe_spool_stat, bytes);
	FIELD(struct fsafe_spool_stat, quarantined);
	FIELD(struct fsafe_spool_stat, truncated);
	FIELD(struct fsafe_spool_stat, dropped);
	FIELD(struct fsafe_spool_stat, quarantined_bytes);
	FIELD(struct fsafe_spool_stat, salvaged);
	FIELD(struct fsafe_spool_stat, lost);
	FIELD(struct fsafe_spool_stat, cursor_ahead);
	FIELD(struct fsafe_spool_stat, quarantine_entries);
	END(struct fsafe_spool_stat);
	printf(", \"IoVec\": {");
	FIELD(struct iovec, iov_base);
	FIELD(struct iovec, iov_len);
	END(struct iovec);
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
