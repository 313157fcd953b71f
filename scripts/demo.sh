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
# The demo's regression is mailed (issue 18): a subscription of a local address to the
# tree's regressions, delivered to `make up`'s mail sink (var/mail/new/).
.venv/bin/python manage.py shell --no-imports -c '
from webapp.alerts.models import Subscription
from webapp.trees.models import Tree
tree = Tree.objects.filter(name="linux-6.12").first()
if tree is not None:
    Subscription.objects.get_or_create(address="demo@localhost", tree=tree, benchmark="")
' 2>/dev/null || echo "demo: could not subscribe demo@localhost to the tree's regressions" >&2
# Counted only where the sink's folder exists: without it (no `make up` yet, or
# perf/time_to_verdict.py's own worker), `ls | wc` fails the pipeline and `set -e` ends the demo.
mails() { if [ -d var/mail/new ]; then ls var/mail/new | wc -l; else echo 0; fi; }
mails_before=$(mails)
.venv/bin/python manage.py compare --tree linux-6.12 --base "$BASE" "${side_b[@]}" \
  --bench sync-rcu-latency --arch x86_64 --runs 24 --max-runs 96 "$@"
url=$(.venv/bin/python -c 'import django, os
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings"); django.setup()
from django.conf import settings
print(settings.RCUBENCH_PUBLIC_URL.rstrip("/"))' 2>/dev/null)
echo "web app: $url/comparisons/ (reports are public); to submit at $url/submit/ or use"
echo "  the API ($url/api/v1/), log in at $url/accounts/login/ as admin, password in var/admin-password"

# The mail goes out once the comparison is done (a worker task): wait for it briefly.
for _ in $(seq 30); do
  [ "$(mails)" -gt "$mails_before" ] && break
  sleep 1
done
newest=$( (ls -t var/mail/new 2>/dev/null || true) | head -1)
if [ -n "$newest" ] && [ "$(mails)" -gt "$mails_before" ]; then
  echo "mail to demo@localhost (a reply in the demo patch's thread): var/mail/new/$newest"
  grep -m4 -E '^(Subject|In-Reply-To|References|Message-ID):' "var/mail/new/$newest" | sed 's/^/  /'
  echo "  read it with: mutt -f var/mail"
else
  echo "no mail: only a regression is mailed to demo@localhost (make up's mail sink: var/mail/)"
fi
