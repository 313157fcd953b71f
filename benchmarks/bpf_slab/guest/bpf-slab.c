/*
 * bpf-slab: sock_inode_cache slab memory while UDP sockets churn and a BPF map-in-map is
 * updated at a swept rate.
 *
 * N socket threads create and close UDP sockets in a loop (each close frees the socket
 * inode through RCU). M updater threads replace the inner maps of a BPF map-in-map
 * (HASH_OF_MAPS or ARRAY_OF_MAPS): each update makes the kernel free the old inner map
 * after a grace period. Between updates they sleep `delay` ms; the delay is swept over
 * the steps given. When grace periods lag, freed sockets wait longer and the slab grows.
 * Every `sample_ms` the sock_inode_cache line of /proc/slabinfo is read; its memory is
 * num_slabs * pages_per_slab * page size (what the cache holds, used or not).
 *
 * Parameters (kernel command line): rcubench.sock_threads=15 rcubench.map_threads=1
 * rcubench.map_type=hash|array rcubench.delays=0,1,2,5,10 rcubench.step_ms=3000
 * rcubench.sample_ms=100.
 * Output, one value per delay step in order:
 *   RCUBENCH-RECORD delay_ms <d>...      RCUBENCH-RECORD slab_kb_mean <kB>...
 *   RCUBENCH-RECORD slab_kb_peak <kB>... RCUBENCH-RECORD update_rate <updates/s>...
 *   RCUBENCH-RECORD socket_rate <sockets/s>...
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/bpf.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "rcubench-guest.h"

#define MAX_STEPS 16
#define MAX_THREADS 64
#define OUTER_ENTRIES 16

static int outer_fd, map_type_hash = 1;
static atomic_int delay_ms, stop;
static atomic_long updates, sockets_made;
static atomic_int failed_errno;

static int bpf(int cmd, union bpf_attr *attr)
{
	return syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

static int inner_map(void)
{
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.map_type = BPF_MAP_TYPE_ARRAY;
	a.key_size = 4;
	a.value_size = 8;
	a.max_entries = 1;
	return bpf(BPF_MAP_CREATE, &a);
}

static int outer_map(int template_fd)
{
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.map_type = map_type_hash ? BPF_MAP_TYPE_HASH_OF_MAPS : BPF_MAP_TYPE_ARRAY_OF_MAPS;
	a.key_size = 4;
	a.value_size = 4;
	a.max_entries = OUTER_ENTRIES;
	a.inner_map_fd = template_fd;
	return bpf(BPF_MAP_CREATE, &a);
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	if (ms > 0)
		nanosleep(&ts, NULL);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *updater(void *arg)
{
	uint32_t key = (uint32_t)(uintptr_t)arg % OUTER_ENTRIES;

	while (!atomic_load(&stop)) {
		union bpf_attr a;
		int fd = inner_map();

		if (fd < 0) {
			atomic_store(&failed_errno, errno);
			break;
		}
		memset(&a, 0, sizeof(a));
		a.map_fd = outer_fd;
		a.key = (uint64_t)(uintptr_t)&key;
		a.value = (uint64_t)(uintptr_t)&fd;
		a.flags = BPF_ANY;
		if (bpf(BPF_MAP_UPDATE_ELEM, &a) != 0) {
			atomic_store(&failed_errno, errno);
			close(fd);
			break;
		}
		close(fd);
		atomic_fetch_add(&updates, 1);
		sleep_ms(atomic_load(&delay_ms));
	}
	return NULL;
}

static void *churner(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		int s = socket(AF_INET, SOCK_DGRAM, 0);

		if (s < 0) {
			atomic_store(&failed_errno, errno);
			break;
		}
		close(s);
		atomic_fetch_add(&sockets_made, 1);
	}
	return NULL;
}

/* sock_inode_cache memory in kB, or -1 if the line is missing. */
static long slab_kb(void)
{
	char line[512];
	long page = sysconf(_SC_PAGESIZE), kb = -1;
	FILE *f = fopen("/proc/slabinfo", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long active, num, size, perslab, pages, a_slabs, n_slabs;

		if (strncmp(line, "sock_inode_cache ", 17) != 0)
			continue;
		if (sscanf(line + 17, "%lu %lu %lu %lu %lu : tunables %*u %*u %*u : slabdata %lu %lu",
			   &active, &num, &size, &perslab, &pages, &a_slabs, &n_slabs) == 7)
			kb = (long)(n_slabs * pages * (unsigned long)page / 1024);
		break;
	}
	fclose(f);
	return kb;
}

/* One record line: the metric, then one value per step with `decimals` decimals. */
static void print_record(const char *metric, const double *values, int n, int decimals)
{
	int i;

	printf("RCUBENCH-RECORD %s", metric);
	for (i = 0; i < n; i++)
		printf(" %.*f", decimals, values[i]);
	printf("\n");
}

int main(void)
{
	pthread_t threads[2 * MAX_THREADS];
	double mean[MAX_STEPS], rate[MAX_STEPS], srate[MAX_STEPS], peak[MAX_STEPS];
	double delays[MAX_STEPS];
	int nsteps = 0, nthreads = 0, i, step, template_fd;
	long socks, maps, step_ms, sample_ms;
	char *p, *list;

	if (rcubench_read_cmdline() != 0)
		return 2;
	socks = rcubench_param("sock_threads", 15);
	maps = rcubench_param("map_threads", 1);
	step_ms = rcubench_param("step_ms", 3000);
	sample_ms = rcubench_param("sample_ms", 100);
	map_type_hash = !strstr(rcubench_cmdline, "rcubench.map_type=array");
	p = strstr(rcubench_cmdline, "rcubench.delays=");
	list = strdup(p ? p + strlen("rcubench.delays=") : "0,1,2,5,10");
	list[strcspn(list, " \n")] = '\0';
	for (p = strtok(list, ","); p && nsteps < MAX_STEPS; p = strtok(NULL, ","))
		delays[nsteps++] = strtol(p, NULL, 10);
	if (socks < 1 || socks > MAX_THREADS || maps < 1 || maps > MAX_THREADS || !nsteps ||
	    step_ms < 10 * sample_ms || sample_ms < 1) {
		fprintf(stderr, "bad parameters: sock_threads=%ld map_threads=%ld steps=%d "
			"step_ms=%ld sample_ms=%ld\n", socks, maps, nsteps, step_ms, sample_ms);
		return 2;
	}
	if (slab_kb() < 0) {
		fprintf(stderr, "no sock_inode_cache line in /proc/slabinfo "
			"(SLUB_DEBUG off, or merged: boot with slab_nomerge)\n");
		return 3;
	}
	template_fd = inner_map();
	outer_fd = template_fd < 0 ? -1 : outer_map(template_fd);
	if (outer_fd < 0) {
		fprintf(stderr, "cannot create the BPF map-in-map: %s\n", strerror(errno));
		return 3;
	}
	atomic_store(&delay_ms, (int)delays[0]);
	for (i = 0; i < maps; i++)
		pthread_create(&threads[nthreads++], NULL, updater, (void *)(uintptr_t)i);
	for (i = 0; i < socks; i++)
		pthread_create(&threads[nthreads++], NULL, churner, NULL);
	for (step = 0; step < nsteps; step++) {
		long u0, s0, samples = 0, sum = 0, kb;
		double t0, t1;

		atomic_store(&delay_ms, (int)delays[step]);
		u0 = atomic_load(&updates);
		s0 = atomic_load(&sockets_made);
		t0 = now_s();
		peak[step] = 0;
		while ((now_s() - t0) * 1000 < step_ms) {
			sleep_ms((int)sample_ms);
			kb = slab_kb();
			if (kb < 0) {
				fprintf(stderr, "sock_inode_cache disappeared from /proc/slabinfo\n");
				return 4;
			}
			sum += kb;
			samples++;
			if (kb > peak[step])
				peak[step] = kb;
		}
		t1 = now_s();
		mean[step] = (double)sum / samples;
		rate[step] = (atomic_load(&updates) - u0) / (t1 - t0);
		srate[step] = (atomic_load(&sockets_made) - s0) / (t1 - t0);
		if (atomic_load(&failed_errno)) {
			fprintf(stderr, "a worker thread failed: %s\n", strerror(atomic_load(&failed_errno)));
			return 4;
		}
	}
	atomic_store(&stop, 1);
	for (i = 0; i < nthreads; i++)
		pthread_join(threads[i], NULL);
	print_record("delay_ms", delays, nsteps, 0);
	print_record("slab_kb_mean", mean, nsteps, 1);
	print_record("slab_kb_peak", peak, nsteps, 0);
	print_record("update_rate", rate, nsteps, 1);
	print_record("socket_rate", srate, nsteps, 1);
	return 0;
}
