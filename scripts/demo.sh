#!/usr/bin/env bash
# `make demo`: rcubench's main job on this machine. After set-up and `make up`, compare the
# default tree (Debian's linux-source-6.12) with itself plus the bundled example patch
# (demo/*.mbox: one more jiffy before each force-quiescent-state scan) on sync-rcu-latency,
# 24 runs per side first, under QEMU/libvirt; print the verdict table and the report URL on the running web
# app. RCUBENCH_DEMO_AA=1 compares the base with itself instead (A/A: no regression due).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

BASE=v6.12.117-debian
side_b=(--series demo/0001-rcu-fqs-one-more-jiffy-demo.mbox)
if [ "${RCUBENCH_DEMO_AA:-0}" = 1 ]; then
  side_b=()
fi
.venv/bin/python manage.py compare --tree linux-6.12 --base "$BASE" "${side_b[@]}" \
  --bench sync-rcu-latency --arch x86_64 --runs 24 --max-runs 96 "$@"
url=$(.venv/bin/python -c 'import django, os
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings"); django.setup()
from django.conf import settings
print(settings.RCUBENCH_PUBLIC_URL.rstrip("/"))' 2>/dev/null)
echo "web app: $url/comparisons/ (reports are public); to submit at $url/submit/ or use"
echo "  the API ($url/api/v1/), log in at $url/accounts/login/ as admin, password in var/admin-password"
