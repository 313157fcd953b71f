/*
 * sync-rcu-latency-exp-load: keep expedited RCU grace periods going from user space while
 * the kernel's rcuscale writer measures synchronize_rcu() (normal grace periods).
 *
 * Each of N threads bind-mounts its own directory onto itself and unmounts it, in a loop.
 * The umount ends in namespace_unlock() (fs/namespace.c, Linux 6.12), which waits with
 * synchronize_rcu_expedited() before it drops the unmounted mount: one expedited grace
 * period per umount, back to back. (A BPF map-in-map update, as bpf-slab does, waits in
 * maybe_wait_bpf_programs() with a normal synchronize_rcu() in 6.12: not this load.)
 *
 * The program never returns while the load runs: the kernel powers off when rcuscale is
 * done (rcuscale.shutdown=1), and an exit would make init power off first. It reports on
 * the kernel log (/dev/kmsg: init holds its stdout until it exits), CLOCK_MONOTONIC
 * nanoseconds being the clock of rcuscale's "start:" and "end:":
 *   rcubench-exp-load: running threads=<n> mono_ns=<t> updates=<u>
 *       once, when every thread has finished an umount;
 *   rcubench-exp-load: rate mono_ns=<t> updates=<u> per_s=<r> slowest=<c>
 *       every report_ms: umounts so far, per second over the period, and the fewest
 *       umounts one thread made in the period (0: a thread stalled);
 *   rcubench-exp-load: stopped mono_ns=<t> reason=<why>
 *       when a thread fails; then it exits 3 (init frames the failure and powers off).
 * devkmsg rate-limits a writer to 10 lines per 5 s, hence one report a second at most.
 *
 * Parameters (kernel command line): rcubench.exp_threads=2 rcubench.report_ms=1000.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rcubench-guest.h"

#define MAX_THREADS 16

static int kmsg = -1;
static atomic_long done[MAX_THREADS];
static atomic_int failed_errno;
static char failed_what[64];

static unsigned long long mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
}

/* One kernel log record: the console shows it with the kernel's timestamp. */
static void report(const char *fmt, ...)
{
	char line[256];
	int n = snprintf(line, sizeof(line), "rcubench-exp-load: ");
	va_list ap;

	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	va_end(ap);
	if (write(kmsg, line, n) < 0)
		fprintf(stderr, "cannot write to /dev/kmsg: %s\n", strerror(errno));
}

static void *load(void *arg)
{
	int me = (int)(uintptr_t)arg;
	char dir[64];

	snprintf(dir, sizeof(dir), "/tmp/rcubench-exp-load-%d", me);
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		snprintf(failed_what, sizeof(failed_what), "mkdir-%d", me);
		atomic_store(&failed_errno, errno);
		return NULL;
	}
	for (;;) {
		if (mount(dir, dir, NULL, MS_BIND, NULL) != 0) {
			snprintf(failed_what, sizeof(failed_what), "mount-%d", me);
			atomic_store(&failed_errno, errno);
			return NULL;
		}
		/* Waits in namespace_unlock() for an expedited grace period. */
		if (umount2(dir, 0) != 0) {
			snprintf(failed_what, sizeof(failed_what), "umount-%d", me);
			atomic_store(&failed_errno, errno);
			return NULL;
		}
		atomic_fetch_add(&done[me], 1);
	}
}

static long total(int n)
{
	long sum = 0;
	int i;

	for (i = 0; i < n; i++)
		sum += atomic_load(&done[i]);
	return sum;
}

/* Reports why the load stopped, on the kernel log and stderr, and the exit status. */
static int stopped(void)
{
	int err = atomic_load(&failed_errno);

	report("stopped mono_ns=%llu reason=%s:%s\n", mono_ns(), failed_what, strerror(err));
	fprintf(stderr, "the expedited load stopped: %s: %s\n", failed_what, strerror(err));
	return 3;
}

int main(void)
{
	pthread_t thread;
	long threads, report_ms, last[MAX_THREADS];
	struct timespec period;
	unsigned long long t0, t1;
	int i, running = 0;

	if (rcubench_read_cmdline() != 0)
		return 2;
	threads = rcubench_param("exp_threads", 2);
	report_ms = rcubench_param("report_ms", 1000);
	if (threads < 1 || threads > MAX_THREADS || report_ms < 100 || report_ms > 60000) {
		fprintf(stderr, "bad parameters: exp_threads=%ld report_ms=%ld\n", threads, report_ms);
		return 2;
	}
	kmsg = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
	if (kmsg < 0) {
		fprintf(stderr, "cannot open /dev/kmsg: %s\n", strerror(errno));
		return 2;
	}
	for (i = 0; i < threads; i++) {
		if (pthread_create(&thread, NULL, load, (void *)(uintptr_t)i) != 0) {
			fprintf(stderr, "cannot start load thread %d\n", i);
			return 2;
		}
	}
	/* Announce the load only once every thread is past its first expedited GP. */
	while (running < threads) {
		struct timespec ms = { 0, 1000000L };

		if (atomic_load(&failed_errno))
			return stopped();
		nanosleep(&ms, NULL);
		for (running = 0, i = 0; i < threads; i++)
			running += atomic_load(&done[i]) > 0;
	}
	t0 = mono_ns();
	report("running threads=%ld mono_ns=%llu updates=%ld\n", threads, t0, total(threads));
	for (i = 0; i < threads; i++)
		last[i] = atomic_load(&done[i]);
	period.tv_sec = report_ms / 1000;
	period.tv_nsec = (report_ms % 1000) * 1000000L;
	for (;;) {
		long before = total(threads), slowest = -1, now;

		nanosleep(&period, NULL);
		if (atomic_load(&failed_errno))
			return stopped();
		t1 = mono_ns();
		for (i = 0; i < threads; i++) {
			now = atomic_load(&done[i]);
			if (slowest < 0 || now - last[i] < slowest)
				slowest = now - last[i];
			last[i] = now;
		}
		now = total(threads);
		report("rate mono_ns=%llu updates=%ld per_s=%.1f slowest=%ld\n", t1, now,
		       (now - before) * 1e9 / (double)(t1 - t0), slowest);
		t0 = t1;
	}
}
