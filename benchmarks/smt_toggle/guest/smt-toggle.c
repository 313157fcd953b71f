/*
 * smt-toggle: time K cycles of turning SMT off and on again through
 * /sys/devices/system/cpu/smt/control, each write timed with CLOCK_MONOTONIC.
 *
 * x86_64 writes "off" / "on"; where the control holds a thread count (powerpc: "8",
 * "4") it writes "1" and then the original count. Each write is checked against
 * /sys/devices/system/cpu/smt/active, so a write that did not toggle is an error,
 * not a fast sample. Cycles: rcubench.cycles=K on the kernel command line (default 10).
 * Output: "RCUBENCH-RECORD off_ms <v>..." and "RCUBENCH-RECORD on_ms <v>...".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CONTROL "/sys/devices/system/cpu/smt/control"
#define ACTIVE "/sys/devices/system/cpu/smt/active"
#define MAX_CYCLES 1000

static int read_line(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Write `value` to the control file; return the elapsed ms, or a negative errno. */
static double timed_write(const char *value)
{
	int fd = open(CONTROL, O_WRONLY);
	double start, end;
	ssize_t n;

	if (fd < 0)
		return -errno;
	start = now_ms();
	n = write(fd, value, strlen(value));
	end = now_ms();
	close(fd);
	if (n < 0)
		return -errno;
	return end - start;
}

static int cycles_from_cmdline(void)
{
	char cmdline[4096];
	char *p;
	int k = 10;

	if (read_line("/proc/cmdline", cmdline, sizeof(cmdline)) == 0 &&
	    (p = strstr(cmdline, "rcubench.cycles=")))
		k = atoi(p + strlen("rcubench.cycles="));
	return k;
}

static int expect_active(const char *want, const char *after)
{
	char active[16];

	if (read_line(ACTIVE, active, sizeof(active)) != 0 || strcmp(active, want) != 0) {
		fprintf(stderr, "smt/active is '%s' after writing %s, expected %s\n",
			active, after, want);
		return -1;
	}
	return 0;
}

int main(void)
{
	static double off_ms[MAX_CYCLES], on_ms[MAX_CYCLES];
	char control[32], on_value[32];
	const char *off_value;
	int k = cycles_from_cmdline(), i, err;

	if (k < 1 || k > MAX_CYCLES) {
		fprintf(stderr, "rcubench.cycles=%d out of range 1..%d\n", k, MAX_CYCLES);
		return 2;
	}
	err = read_line(CONTROL, control, sizeof(control));
	if (err) {
		fprintf(stderr, "cannot read %s: %s\n", CONTROL, strerror(-err));
		return 3;
	}
	if (strcmp(control, "on") == 0) {
		off_value = "off";
		strcpy(on_value, "on");
	} else if (atoi(control) > 1) {
		off_value = "1";
		snprintf(on_value, sizeof(on_value), "%s", control);
	} else {
		fprintf(stderr, "SMT control is '%s': no SMT to toggle in this topology\n", control);
		return 3;
	}
	for (i = 0; i < k; i++) {
		off_ms[i] = timed_write(off_value);
		if (off_ms[i] < 0) {
			fprintf(stderr, "writing %s failed: %s\n", off_value, strerror((int)-off_ms[i]));
			return 4;
		}
		if (expect_active("0", off_value))
			return 4;
		on_ms[i] = timed_write(on_value);
		if (on_ms[i] < 0) {
			fprintf(stderr, "writing %s failed: %s\n", on_value, strerror((int)-on_ms[i]));
			return 4;
		}
		if (expect_active("1", on_value))
			return 4;
	}
	printf("RCUBENCH-RECORD off_ms");
	for (i = 0; i < k; i++)
		printf(" %.3f", off_ms[i]);
	printf("\nRCUBENCH-RECORD on_ms");
	for (i = 0; i < k; i++)
		printf(" %.3f", on_ms[i]);
	printf("\n");
	return 0;
}
