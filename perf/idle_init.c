/*
 * The guest's /init for the "idle-init" configurations of perf/quiet_measurement.py: the
 * only file of their initramfs. It does nothing at all while the kernel's own rcuscale test
 * runs (which powers the guest off when done): no busybox, no mounts, no symlinks written,
 * no console output, no other process. rcubench's standard init (vm-images/init) idles too
 * for in-kernel benchmarks, but only after `busybox --install -s` (hundreds of symlinks),
 * four mounts and a READY line, in a larger image holding every benchmark's guest program.
 */
#include <unistd.h>

int main(void)
{
	for (;;)
		pause();
}
