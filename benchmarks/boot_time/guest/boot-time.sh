#!/bin/sh
# boot-time: report the RCU boot settings in effect, and when each grace period of the boot
# ended. The kernel traces rcu:rcu_grace_period and rcu:rcu_exp_grace_period from its command
# line on (trace_event=, trace_clock=global: the printk clock); the parser counts the ends
# before RCU's boot end. The times come from the kernel's timestamps and from the host (see
# benchmarks/boot_time/parser.py).
# First, a kernel message: its printk stamp is when init was ready on the clock "Run /init"
# was stamped with. /proc/uptime (init's READY line) is another clock, seen up to 70 ms
# behind it on ppc64le, so init to ready cannot be read across the two.
echo "rcubench: boot-time starts" > /dev/kmsg || { echo "cannot write /dev/kmsg" >&2; exit 1; }
for knob in rcu_expedited rcu_normal; do
  value=$(cat /sys/kernel/$knob 2>/dev/null) || { echo "no /sys/kernel/$knob" >&2; exit 1; }
  echo "RCUBENCH-RECORD $knob $value"
done
t=/sys/kernel/tracing
[ -e $t/trace ] || mount -t tracefs nodev $t || { echo "cannot mount tracefs on $t" >&2; exit 1; }
# Stop first: the buffer read below is then the boot's, whole, with nothing added under it.
echo 0 > $t/tracing_on || { echo "no $t/tracing_on (a kernel without tracing?)" >&2; exit 1; }
# entries-in-buffer/entries-written differ when the ring buffer wrapped (events lost). The
# ends go out 16 to a line: one record line per event would flood the serial console.
awk '
  /^# entries-in-buffer\/entries-written:/ { split($3, n, "/"); print "RCUBENCH-RECORD trace_entries", n[1], n[2] }
  / rcu_(exp_)?grace_period: [^ ]+ -?[0-9]+ end$/ {
    for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+:$/) break
    if (i > NF) next
    key = ($0 ~ / rcu_exp_grace_period: /) ? "exp_gp_end_s" : "gp_end_s"
    line[key] = line[key] " " substr($i, 1, length($i) - 1)
    if (++count[key] % 16 == 0) { print "RCUBENCH-RECORD " key line[key]; line[key] = "" }
  }
  END { for (key in line) if (line[key] != "") print "RCUBENCH-RECORD " key line[key] }
' $t/trace
