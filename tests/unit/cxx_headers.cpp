// Every public header from C++, every *_INIT macro used: the headers must
// compile warning-free under -Wall -Wextra -Wpedantic from C++11 on
// (tests/unit/cxx_headers.sh builds this with each C++ compiler found).
#include <fsafe.h>
#include <fsafe/batch.h>
#include <fsafe/checkpoint.h>
#include <fsafe/inbox.h>
#include <fsafe/lock.h>
#include <fsafe/root.h>
#include <fsafe/spool.h>
#include <fsafe/store.h>

int main()
{
	struct fsafe_write_opts w = FSAFE_WRITE_OPTS_INIT;
	struct fsafe_batch_opts b = FSAFE_BATCH_OPTS_INIT;
	struct fsafe_async_opts a = FSAFE_ASYNC_OPTS_INIT;
	struct fsafe_checkpoint_opts c = FSAFE_CHECKPOINT_OPTS_INIT;
	struct fsafe_checkpoint_load_opts cl = FSAFE_CHECKPOINT_LOAD_OPTS_INIT;
	struct fsafe_inbox_opts i = FSAFE_INBOX_OPTS_INIT;
	struct fsafe_inbox_recovery ir = FSAFE_INBOX_RECOVERY_INIT;
	struct fsafe_lock_opts l = FSAFE_LOCK_OPTS_INIT;
	struct fsafe_root_opts ro = FSAFE_ROOT_OPTS_INIT;
	static_assert(FSAFE_WRITE_OPTS_SIZE_V0 + FSAFE_BATCH_OPTS_SIZE_V0 +
	                      FSAFE_ASYNC_OPTS_SIZE_V0 +
	                      FSAFE_LOCK_OPTS_SIZE_V0 +
	                      FSAFE_LOCK_OWNER_SIZE_V0 +
	                      FSAFE_ROOT_OPTS_SIZE_V0 > 0,
	              "the *_SIZE_V0 macros are constant expressions");
	struct fsafe_spool_opts s = FSAFE_SPOOL_OPTS_INIT;
	struct fsafe_spool_stat ss = FSAFE_SPOOL_STAT_INIT;
	struct fsafe_store_opts st = FSAFE_STORE_OPTS_INIT;
	struct fsafe_store_list_opts sl = FSAFE_STORE_LIST_OPTS_INIT;

	// Each carries its own size and zeros elsewhere.
	return !(w.size == sizeof(w) && w.flags == 0 && b.size == sizeof(b) &&
	         a.size == sizeof(a) && c.size == sizeof(c) &&
	         cl.size == sizeof(cl) && i.size == sizeof(i) &&
	         l.size == sizeof(l) && l.timeout_ms == 0 &&
	         ro.size == sizeof(ro) && ro.error == nullptr &&
	         s.size == sizeof(s) && ss.size == sizeof(ss) &&
	         st.size == sizeof(st) && sl.size == sizeof(sl) &&
	         ir.size == sizeof(ir) &&
	         FSAFE_INBOX_OPTS_SIZE_V0 <= sizeof(i) &&
	         FSAFE_INBOX_RECOVERY_SIZE_V0 <= sizeof(ir) &&
	         FSAFE_SPOOL_OPTS_SIZE_V0 <= sizeof(s) &&
	         FSAFE_SPOOL_STAT_SIZE_V0 <= sizeof(ss) &&
	         FSAFE_CHECKPOINT_OPTS_SIZE_V0 <= sizeof(c) &&
	         FSAFE_CHECKPOINT_LOAD_OPTS_SIZE_V0 <= sizeof(cl));
}
