/*
 * What every rcubench guest program shares: its parameters, read from the kernel command
 * line as rcubench.<name>=<integer>. The first occurrence counts, as in vm-images/init:
 * the run service puts the benchmark's own parameters before a submitter's extras.
 *
 * Included by benchmarks/<bench>/guest/<prog>.c (engine/vm/images.py compiles each with
 * -I benchmarks/include); static functions, so each program is still one translation unit.
 */
#ifndef RCUBENCH_GUEST_H
#define RCUBENCH_GUEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char rcubench_cmdline[4096];

/* Read /proc/cmdline once; 0 on success, else a message on stderr and -1. */
static int rcubench_read_cmdline(void)
{
	FILE *f = fopen("/proc/cmdline", "r");

	if (!f || !fgets(rcubench_cmdline, sizeof(rcubench_cmdline), f)) {
		fprintf(stderr, "cannot read /proc/cmdline\n");
		if (f)
			fclose(f);
		return -1;
	}
	fclose(f);
	return 0;
}

/* rcubench.<name>=<integer> from the command line read above, or dflt. */
static long rcubench_param(const char *name, long dflt)
{
	char key[64];
	char *p;

	snprintf(key, sizeof(key), "rcubench.%s=", name);
	p = strstr(rcubench_cmdline, key);
	return p ? strtol(p + strlen(key), NULL, 10) : dflt;
}

#endif
