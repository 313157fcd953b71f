#!/bin/sh
# boot-time: report the RCU boot settings in effect; the times come from the kernel's
# timestamps and from the host (see benchmarks/boot_time/parser.py).
for knob in rcu_expedited rcu_normal; do
  value=$(cat /sys/kernel/$knob 2>/dev/null) || { echo "no /sys/kernel/$knob" >&2; exit 1; }
  echo "RCUBENCH-RECORD $knob $value"
done
