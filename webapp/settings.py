"""Django settings for rcubench, read from the environment (and an optional .env file).

Every variable is listed with its default in .env.example.
"""

import os
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from stats import defaults
from webapp import logs

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
# scripts/setup.sh writes the local one (a random secret key, plain HTTP); values already in
# the environment win over the file.
environ.Env.read_env(os.environ.get("RCUBENCH_ENV_FILE", BASE_DIR / ".env"))

DEBUG = env.bool("DJANGO_DEBUG", default=False)
# `manage.py compare --server URL` is a client of another rcubench's REST API, on a machine
# that may hold none of this one's settings: manage.py marks it so (remote_client()). It signs
# nothing, so it starts without a secret key; the key stays empty, which Django refuses to
# sign with, should anything in that process ever try.
REMOTE_CLIENT = env.bool("RCUBENCH_REMOTE_CLIENT", default=False)
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="")
if not SECRET_KEY and not REMOTE_CLIENT:
    if not DEBUG:
        # A well-known default would let anyone forge sessions and password-reset tokens.
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY is not set: set it in the environment or in .env "
            "(scripts/setup.sh writes a random one for local use)"
        )
    SECRET_KEY = "django-insecure-debug-only"
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

# --- HTTPS (`manage.py check --deploy`) ---
# Production serves HTTPS through a TLS-terminating proxy in front of gunicorn: every
# HTTPS-only setting is on unless DJANGO_HTTPS=false, which `make up` and the tests use (they
# serve plain HTTP on 127.0.0.1; scripts/setup.sh writes it into the local .env).
RCUBENCH_HTTPS = env.bool("DJANGO_HTTPS", default=not DEBUG)
SECURE_SSL_REDIRECT = RCUBENCH_HTTPS
SESSION_COOKIE_SECURE = RCUBENCH_HTTPS
CSRF_COOKIE_SECURE = RCUBENCH_HTTPS
SECURE_HSTS_SECONDS = env.int(
    "DJANGO_SECURE_HSTS_SECONDS", default=365 * 24 * 3600 if RCUBENCH_HTTPS else 0
)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool(
    "DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=RCUBENCH_HTTPS
)
SECURE_HSTS_PRELOAD = env.bool("DJANGO_SECURE_HSTS_PRELOAD", default=RCUBENCH_HTTPS)
# The proxy says which scheme the client used; it must overwrite any X-Forwarded-Proto the
# client sent (the web port is published on 127.0.0.1 only, for that proxy).
if env.bool("DJANGO_SECURE_PROXY_SSL_HEADER", default=RCUBENCH_HTTPS):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Container and load-balancer probes ask for /healthz over plain HTTP.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "axes",
    "rest_framework",
    "knox",
    "drf_spectacular",
    "django_filters",
    "django_htmx",
    "webapp.trees",
    "webapp.comparisons",
    "webapp.analysis",
    "webapp.alerts",
    "webapp.reports",
    "webapp.accounts",
    "webapp.watch",
    "webapp.webhooks",
    "webapp.lab",
    "webapp.bisections",
    "webapp.regressions",
    "webapp.sweeps",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into its lockout response.
    "axes.middleware.AxesMiddleware",
]

# --- Accounts: Django's own auth; django-axes first so a locked-out name never reaches the
# password check. Lockout per (user name, client address) after AXES_FAILURE_LIMIT failures.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env.int("AXES_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = env.float("AXES_COOLOFF_HOURS", default=1.0)  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
# The address of that pair is the client's, not the TLS proxy's (which every proxied request
# arrives from: a per-address lockout would lock a user name for everyone). Trusted proxies in
# front of gunicorn, each appending to X-Forwarded-For: the client is the entry the outermost
# one appended; with 0 the header is ignored. Also the API throttles' NUM_PROXIES below.
# RCUBENCH_API_NUM_PROXIES is its older name.
RCUBENCH_NUM_PROXIES = env.int(
    "RCUBENCH_NUM_PROXIES",
    default=env.int("RCUBENCH_API_NUM_PROXIES", default=1 if RCUBENCH_HTTPS else 0),
)
AXES_CLIENT_IP_CALLABLE = "webapp.accounts.clients.client_address"
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "reports:comparison-list"
LOGOUT_REDIRECT_URL = "reports:comparison-list"

ROOT_URLCONF = "webapp.urls"
WSGI_APPLICATION = "webapp.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": env.db(
        # No password here: scripts/setup.sh writes the URL with this machine's into .env.
        "DATABASE_URL",
        default="postgres://rcubench@127.0.0.1:5432/rcubench",
    ),
}
DATABASES["default"].setdefault("OPTIONS", {})["connect_timeout"] = env.int(
    "DATABASE_CONNECT_TIMEOUT", default=5
)
# Persistent connections (seconds; 0: one per request or task). A new PostgreSQL
# connection costs a backend process and its authentication (connect, one query, close:
# 4.2 ms median here, a query on an open connection 0.1 ms); the web server keeps its few
# (webapp/wsgi.py sets 60), while the workers of many hosts close theirs after each task,
# since max_connections bounds them.
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=0)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
# Only images (Dockerfile) collect static files; locally WhiteNoise serves them from the apps.
STATIC_ROOT = env.str("STATIC_ROOT", default=None)
WHITENOISE_USE_FINDERS = True

# JSON lines (webapp/logs.py): to RCUBENCH_LOG_FILE when set (scripts/service.sh sets one
# per process: var/log/{web,worker,beat}.log), else to stderr, as readable text on a
# terminal. The file is set here rather than by Celery's --logfile: Django configures
# logging again in each prefork pool child, which would drop a handler Celery installed.
logs.configure()
RCUBENCH_LOG_FILE = env.str("RCUBENCH_LOG_FILE", default="")
LOG_LEVEL = env.str("LOG_LEVEL", default="INFO").upper()
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "structured": {"()": "webapp.logs.formatter"},
        "json": {"()": "webapp.logs.formatter", "json": True},
    },
    "handlers": {
        "out": (
            # Watched: logrotate may move the file; the handler reopens it.
            {
                "class": "logging.handlers.WatchedFileHandler",
                "filename": RCUBENCH_LOG_FILE,
                "formatter": "json",
            }
            if RCUBENCH_LOG_FILE
            else {"class": "logging.StreamHandler", "formatter": "structured"}
        ),
    },
    "root": {"handlers": ["out"], "level": LOG_LEVEL},
    # A library's start-up banner (django-axes' "AXES: BEGIN version ...") on every
    # manage.py command's stderr reads as a warning to a CLI user: shown at DEBUG only.
    "loggers": {"axes.apps": {"level": "DEBUG" if LOG_LEVEL == "DEBUG" else "WARNING"}},
}

# --- Celery (read by workers/celery_app.py with the CELERY_ namespace) ---
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="redis://127.0.0.1:6379/0")
# The broker carries only "do step X for id N"; results and state live in PostgreSQL.
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# A task is acknowledged only after it ran, and one killed with its worker goes back to the
# queue; the database state machine (heartbeats + reaper) is what makes that safe.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TIMEZONE = TIME_ZONE

# --- rcubench ---
LIBVIRT_URI = env.str("LIBVIRT_URI", default="qemu:///system")
# Benchmark queues served by this deployment, one per Target ("bench.<target name>").
RCUBENCH_BENCH_TARGETS = env.list("RCUBENCH_BENCH_TARGETS", default=["qemu-x86_64", "qemu-ppc64le"])
# Which targets this host's bench workers serve (workers/serving.py): fnmatch patterns over
# Target names (e.g. "qemu-*,lab-power9"). A worker that starts on a bench queue consumes the
# queue of every enabled Target matching them, read again every RCUBENCH_SERVE_POLL_SECONDS,
# and records so in the database (ServedQueue). Unset: the targets of the bench queues the
# worker starts with (its -Q; without -Q, RCUBENCH_BENCH_TARGETS).
RCUBENCH_SERVE = env.list("RCUBENCH_SERVE", default=None)
RCUBENCH_SERVE_POLL_SECONDS = env.float("RCUBENCH_SERVE_POLL_SECONDS", default=30.0)
# A submission to a target that no worker has recorded serving (within 3 polls) is refused.
RCUBENCH_REQUIRE_SERVED_TARGETS = env.bool("RCUBENCH_REQUIRE_SERVED_TARGETS", default=True)
# A running run whose heartbeat is older than this is presumed lost (worker killed, host down).
RCUBENCH_RUN_STALE_SECONDS = env.int("RCUBENCH_RUN_STALE_SECONDS", default=300)
RCUBENCH_REAPER_INTERVAL_SECONDS = env.int("RCUBENCH_REAPER_INTERVAL_SECONDS", default=60)
# Watched trees (webapp/watch): how often the beat polls trees, takes up pushes that are due
# or waiting for the active limit, and looks for change points.
RCUBENCH_WATCH_TICK_SECONDS = env.int("RCUBENCH_WATCH_TICK_SECONDS", default=30)
# Timeout of each reachability probe behind /healthz.
RCUBENCH_HEALTH_TIMEOUT_SECONDS = env.float("RCUBENCH_HEALTH_TIMEOUT_SECONDS", default=3.0)
# /healthz probes at most once per this many seconds per web process (it is anonymous).
RCUBENCH_HEALTH_CACHE_SECONDS = env.float("RCUBENCH_HEALTH_CACHE_SECONDS", default=5.0)

# --- kernel builds (engine/build) ---
# Mirrors, artifacts, slots and ccache live under the data dir (scripts/setup.sh creates it).
RCUBENCH_DATA_DIR = env.path("RCUBENCH_DATA_DIR", default="/var/lib/rcubench")
# When a worker runs as root, builds drop to this unprivileged user inside bubblewrap.
# Shared by every build on this worker (and by test runs, which keep their own data dirs).
RCUBENCH_CCACHE_DIR = env.path("RCUBENCH_CCACHE_DIR", default=RCUBENCH_DATA_DIR("ccache"))
RCUBENCH_BUILD_USER = env.str("RCUBENCH_BUILD_USER", default="rcubench-build")
RCUBENCH_BUILD_TIMEOUT_SECONDS = env.int("RCUBENCH_BUILD_TIMEOUT_SECONDS", default=3600)
# A build is refused (no-space) unless this much disk is free after pruning.
RCUBENCH_BUILD_MIN_FREE_GB = env.float("RCUBENCH_BUILD_MIN_FREE_GB", default=5.0)
# LRU limits: artifacts beyond this size, and slots (worktree + object dir) beyond this count.
RCUBENCH_BUILD_CACHE_MAX_GB = env.float("RCUBENCH_BUILD_CACHE_MAX_GB", default=20.0)
RCUBENCH_BUILD_MAX_SLOTS = env.int("RCUBENCH_BUILD_MAX_SLOTS", default=6)
# What one build step may use: memory (a cgroup for the whole step where the worker is root,
# and every process's address space) and processes. A -j2 tinyconfig build peaks near 1 GiB.
RCUBENCH_BUILD_MEMORY_GB = env.float("RCUBENCH_BUILD_MEMORY_GB", default=8.0)
RCUBENCH_BUILD_MAX_PROCESSES = env.int("RCUBENCH_BUILD_MAX_PROCESSES", default=4096)

# --- benchmark runs (engine/vm) ---
# A run whose kernel has not reached init by then is boot-failed; one that has not powered
# off by boot + bench limits is a timeout. TCG boots take seconds; lab machines longer.
RCUBENCH_BOOT_TIMEOUT_SECONDS = env.int("RCUBENCH_BOOT_TIMEOUT_SECONDS", default=300)
RCUBENCH_BENCH_TIMEOUT_SECONDS = env.int("RCUBENCH_BENCH_TIMEOUT_SECONDS", default=900)
# Use KVM instead of TCG: only where /dev/kvm runs stock kernels (not on PVM hosts).
RCUBENCH_VM_KVM = env.bool("RCUBENCH_VM_KVM", default=False)
# A console past this size ends its run as console-overflow (real ones are 10-30 kB); the
# database keeps at most RCUBENCH_CONSOLE_KEEP_BYTES of one (its head and tail).
RCUBENCH_CONSOLE_MAX_BYTES = env.int("RCUBENCH_CONSOLE_MAX_BYTES", default=16 * 2**20)
RCUBENCH_CONSOLE_KEEP_BYTES = env.int("RCUBENCH_CONSOLE_KEEP_BYTES", default=2**20)
# A run is flagged contended when other processes used more than this share of the host's
# CPU time while it ran (engine/run/hostload.py). Measured on a 2-core TCG host during a
# sync-rcu-latency boot: idle 0.00-0.03; beside one busy loop (`yes > /dev/null`, or Python's
# `while True: pass`) 0.47-0.55, a whole core.
RCUBENCH_CONTENTION_SHARE = env.float("RCUBENCH_CONTENTION_SHARE", default=0.25)
# When the share of contended data runs differs between sides by more, the report warns and
# the engine holds a regression/improvement back.
RCUBENCH_CONTENTION_IMBALANCE = env.float(
    "RCUBENCH_CONTENTION_IMBALANCE", default=defaults.CONTENTION_IMBALANCE
)
# Pin the guest's vCPUs and emulator to host CPUs of their own where the host has more than
# vCPUs + 1 (libvirt cputune). Off where several bench workers share one host: each would
# pin its guests to the same CPUs.
RCUBENCH_VM_PIN = env.bool("RCUBENCH_VM_PIN", default=True)
# The most vCPUs one guest may have on this deployment's bench hosts: a target derived for a
# sweep (engine/vm/topology.py) with more is refused when the sweep is submitted. 16 is
# the largest shape the sweeps are accepted at (ppc64le 2 cores x SMT8); under TCG each
# vCPU is a host thread, so a 2-core host runs 16 (slowly: boots take longer). Set it to
# what the smallest host serving QEMU targets should run.
RCUBENCH_MAX_VCPUS = env.int("RCUBENCH_MAX_VCPUS", default=16)

# --- kernels on other hosts (engine/build/artifacts.py) ---
# A runner host whose build store is elsewhere fetches kernels from the build host's
# artifact server (python -m engine.build.artifacts) at this URL, with the shared secret,
# into <data dir>/artifact-cache (at most RCUBENCH_ARTIFACT_CACHE_GB, least recently used
# first out). Empty: kernels are read from the local store only (one host, or a shared disk).
RCUBENCH_ARTIFACT_URL = env.str("RCUBENCH_ARTIFACT_URL", default="")
RCUBENCH_ARTIFACT_SECRET = env.str("RCUBENCH_ARTIFACT_SECRET", default="")
RCUBENCH_ARTIFACT_CACHE_GB = env.float("RCUBENCH_ARTIFACT_CACHE_GB", default=10.0)

# --- lab hosts (engine/lab, webapp/lab) ---
# Power cycles of a lab host that did not come back after a run before it is disabled.
RCUBENCH_LAB_RECOVERY_TRIES = env.int("RCUBENCH_LAB_RECOVERY_TRIES", default=3)
# How long a lab run waits for a host of its comparison's class to be free.
RCUBENCH_LAB_HOST_WAIT_SECONDS = env.int("RCUBENCH_LAB_HOST_WAIT_SECONDS", default=1800)

# --- comparisons (webapp/comparisons/orchestrator.py) ---
# Where the web app is reached: report URLs printed by `./manage.py compare` and in mail.
RCUBENCH_PUBLIC_URL = env.str("RCUBENCH_PUBLIC_URL", default="http://127.0.0.1:8000")
# A failed or lost run is replaced by a new Run row while its side needs runs; a side's
# failure budget (stats/failures.py, not a setting: its figures are simulated) ends that.
# Tries of one look's analysis that raise an engine error (or whose worker dies) before
# the comparison ends as analysis-failed with the error's text.
RCUBENCH_ANALYSIS_TRIES = env.int("RCUBENCH_ANALYSIS_TRIES", default=3)
# Diagnostic runs (docs/tracing.md): traced runs of the RCU benchmarks after the verdict,
# this many per side, for which comparisons: "changes" (a regression or an improvement of
# a traceable benchmark), "all", or "never" (then only on request from the report or API).
# Never for bisection steps. They never enter a verdict.
RCUBENCH_DIAGNOSE = env.str("RCUBENCH_DIAGNOSE", default="changes")
if RCUBENCH_DIAGNOSE not in ("changes", "all", "never"):
    raise ImproperlyConfigured(f"RCUBENCH_DIAGNOSE is {RCUBENCH_DIAGNOSE!r}: it must be "
                               "changes, all or never")  # fmt: skip
# 6: the most that keeps what a diagnosis adds after a 24 + 24 comparison's verdict within
# 25% of its time to verdict (perf/time_to_verdict.py --diagnose: 6 a side 23%, 8 a side 31%).
RCUBENCH_DIAGNOSIS_RUNS = env.int("RCUBENCH_DIAGNOSIS_RUNS", default=6)
# Regressions (webapp/regressions/rules.py): fixed once this many newest tested heads of the
# branch are back within the threshold of the baseline; inactive after this many tested heads
# that did not report it again.
RCUBENCH_REGRESSION_FIXED_HEADS = env.int("RCUBENCH_REGRESSION_FIXED_HEADS", default=2)
RCUBENCH_REGRESSION_INACTIVE_PUSHES = env.int("RCUBENCH_REGRESSION_INACTIVE_PUSHES", default=10)
# Bisection (webapp/bisections): the longest first-parent range it steps through (each
# position may be a kernel build), and the most patches a per-patch attribution measures
# (each is a comparison of its own).
RCUBENCH_BISECT_MAX_COMMITS = env.int("RCUBENCH_BISECT_MAX_COMMITS", default=1000)
RCUBENCH_ATTRIBUTION_MAX_PATCHES = env.int("RCUBENCH_ATTRIBUTION_MAX_PATCHES", default=12)
# A sweep's points at most (webapp/sweeps): each is a comparison of its own, all run at once.
RCUBENCH_SWEEP_MAX_POINTS = env.int("RCUBENCH_SWEEP_MAX_POINTS", default=6)
# The analysis task's hard time limit (workers/celery_app.py): a try started longer ago
# than this, with its comparison still analysing, had its worker die and is sent again.
RCUBENCH_ANALYSIS_TIME_LIMIT_SECONDS = env.int("RCUBENCH_ANALYSIS_TIME_LIMIT_SECONDS",
                                               default=1800)  # fmt: skip
# A queued step whose task was sent this long ago with nothing of its comparison running
# is sent again (the broker lost it: Redis restarted); duplicates are no-ops by the claim.
RCUBENCH_REDISPATCH_SECONDS = env.int("RCUBENCH_REDISPATCH_SECONDS", default=120)
# Seconds between the worker's checks that its run was not cancelled meanwhile.
RCUBENCH_CANCEL_POLL_SECONDS = env.float("RCUBENCH_CANCEL_POLL_SECONDS", default=1.0)
# Largest patch series accepted (mbox bytes).
RCUBENCH_MAX_MBOX_BYTES = env.int("RCUBENCH_MAX_MBOX_BYTES", default=10 * 2**20)
# Most patches in one series (counted before the mbox is parsed): RCU series run to tens of
# patches, the largest tree-wide series posted to LKML to a few hundred.
RCUBENCH_MAX_SERIES_PATCHES = env.int("RCUBENCH_MAX_SERIES_PATCHES", default=500)
# Most runs per side one comparison may ask for (each is a boot on a shared target queue).
# 4x the default maximum (96): the runs that halve the smallest shift that can be detected.
RCUBENCH_MAX_RUNS_PER_SIDE = env.int("RCUBENCH_MAX_RUNS_PER_SIDE", default=400)
# Label in every VM name of this instance (tests use "test-"): a worker destroys only its
# own instance's leftover VMs, so tests and a running service can share one libvirtd.
RCUBENCH_INSTANCE = env.str("RCUBENCH_INSTANCE", default="")
# TEST ONLY: allow fewer than 24 runs per side (the statistics refuse it otherwise).
RCUBENCH_ALLOW_FEW_RUNS = env.bool("RCUBENCH_ALLOW_FEW_RUNS", default=False)

# --- REST API (webapp/api: Django REST framework, OpenAPI by drf-spectacular, knox tokens) ---
# Clients authenticate with a knox token ("Authorization: Token <token>"; per user, stored
# hashed, scoped, revocable; created and revoked from a logged-in session: the page
# /accounts/tokens/ or POST /api/v1/tokens/) or with the session of a logged-in browser.
# Anonymous clients read public data; writes need an account.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # First: its "WWW-Authenticate: Token" header makes a missing token a 401.
        "webapp.api.auth.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # A token's scopes on top (read to read, submit to write; 403 naming the scope).
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticatedOrReadOnly",
        "webapp.api.auth.TokenScopes",
    ],
    "DEFAULT_PAGINATION_CLASS": "webapp.api.pagination.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_PARSER_CLASSES": [
        "rest_framework.parsers.JSONParser",
        "rest_framework.parsers.MultiPartParser",
        "rest_framework.parsers.FormParser",
    ],
    # Per client address (anonymous) and per account; "submit" and "token" are the scopes of
    # comparison creation and token creation, on top of the user rate.
    "DEFAULT_THROTTLE_CLASSES": [
        "webapp.api.throttling.AnonThrottle",
        "webapp.api.throttling.UserThrottle",
        "webapp.api.throttling.ScopedThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon": env.str("RCUBENCH_API_ANON_RATE", default="120/min"),
        "user": env.str("RCUBENCH_API_USER_RATE", default="1200/min"),
        "submit": env.str("RCUBENCH_API_SUBMIT_RATE", default="60/hour"),
        "token": env.str("RCUBENCH_API_TOKEN_RATE", default="30/hour"),
    },
    # The client address of anonymous throttling: behind the TLS proxy, the last
    # X-Forwarded-For entry (the one the proxy appended); else the peer address, never a
    # header the client wrote. The same count as the login lockout's (above).
    "NUM_PROXIES": RCUBENCH_NUM_PROXIES,
    "EXCEPTION_HANDLER": "webapp.api.errors.exception_handler",
}
# Throttle counters must be shared by every web process (gunicorn runs 2 locally, 3 in
# docker-compose): a local-memory cache would count per process. They live in the broker's
# Redis, in a database of their own (RCUBENCH_API_CACHE_DB, default 1; the broker uses 0).
# Should that Redis be unreachable, the throttles let requests through (webapp/api/throttling.py).
from datetime import timedelta  # noqa: E402
from urllib.parse import urlsplit  # noqa: E402

RCUBENCH_API_CACHE_URL = (
    env.str("RCUBENCH_API_CACHE_URL", default="")
    or urlsplit(CELERY_BROKER_URL)
    ._replace(path=f"/{env.int('RCUBENCH_API_CACHE_DB', default=1)}", query="")
    .geturl()
)
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "api": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": RCUBENCH_API_CACHE_URL,
        "KEY_PREFIX": "rcubench-api",
        "TIMEOUT": 3600,
        "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
    },
    # The figures of done comparisons (webapp/reports/sections.py, cached_figure_sections):
    # files under the data dir, so every gunicorn process shares them and they outlive a
    # restart (a locmem cache would draw them once per process and per restart; Redis
    # would hold ~50 kB an entry in memory, and is the broker). A done comparison's figures
    # never change, so entries live long; MAX_ENTRIES bounds the directory (entries are
    # ~20-60 kB compressed, so ~100 MB at most), culling a third when it is full.
    "reports": {
        "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
        # scripts/service.sh points it at var/cache/reports, owned by the web user (the web
        # app writes nothing under the data dir).
        "LOCATION": env.str(
            "RCUBENCH_REPORT_CACHE_DIR", default=str(RCUBENCH_DATA_DIR("cache/reports"))
        ),
        "TIMEOUT": 30 * 24 * 3600,
        "OPTIONS": {"MAX_ENTRIES": 2000, "CULL_FREQUENCY": 3},
    },
}
REST_KNOX = {
    # Tokens are long-lived (a CLI on a developer's machine), revocable, and at most 20 per
    # account. The prefix lets secret scanners recognise a leaked token.
    "TOKEN_TTL": timedelta(days=env.int("RCUBENCH_API_TOKEN_TTL_DAYS", default=180)),
    "TOKEN_LIMIT_PER_USER": 20,
    "TOKEN_PREFIX": "rcb_",
    "AUTO_REFRESH": False,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "rcubench API",
    "DESCRIPTION": (
        "Submit kernel comparisons and read their runs, raw measurements and verdicts. "
        "Authenticate with 'Authorization: Token <token>' (create one at /accounts/tokens/, "
        "or with POST /api/v1/tokens/ from a logged-in session; scope read, or read and "
        "submit to submit and cancel). A restricted comparison and everything under it is "
        "404 to anyone outside its tree's members."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "COMPONENT_SPLIT_REQUEST": True,
    "PATH_CONVERTER_OVERRIDES": {"id": int},  # webapp/api/urls.py: ids, negative ones 404
    # Errors every operation may answer (401, 403, 404, 429, 400 where it takes input).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "webapp.api.schema.add_error_responses",
    ],
    "ENUM_NAME_OVERRIDES": {
        "ComparisonStateEnum": "webapp.comparisons.models.ComparisonState",
        "RunStateEnum": "webapp.states.State",
        "ResultEnum": "webapp.states.Result",
        "ComparisonErrorCodeEnum": "webapp.comparisons.models.Comparison.Error",
        "RunErrorCodeEnum": "webapp.comparisons.models.Run.Error",
        "TriggerEnum": "webapp.comparisons.models.Comparison.Trigger",
        "BisectionTriggerEnum": "webapp.bisections.models.Bisection.Trigger",
        "BisectionKindEnum": "webapp.bisections.models.Bisection.Kind",
        "BisectionStateEnum": "webapp.bisections.models.BisectionState",
        "RegressionStateEnum": "webapp.regressions.models.RegressionState",
        "BisectionErrorCodeEnum": "webapp.bisections.models.Bisection.Error",
        "StepKindEnum": "webapp.bisections.models.Step.Kind",
    },
}

# --- webhooks (webapp/webhooks) ---
# Push webhooks (docs/webhooks.md): a body over this size is refused (413); requests over the
# rate, per tree, are refused (429; counted in CACHES["api"]); the generic git hook's
# timestamp may be at most this far from the server's clock (replays are refused after).
RCUBENCH_WEBHOOK_MAX_BYTES = env.int("RCUBENCH_WEBHOOK_MAX_BYTES", default=2**20)
RCUBENCH_WEBHOOK_RATE = env.str("RCUBENCH_WEBHOOK_RATE", default="60/minute")
RCUBENCH_WEBHOOK_MAX_SKEW_SECONDS = env.int("RCUBENCH_WEBHOOK_MAX_SKEW_SECONDS", default=300)

# --- mail (webapp/alerts) ---
# Alert mails (docs/alerts.md) go out through Django's SMTP backend. The defaults reach the
# local debugging server of `make up` (aiosmtpd on 127.0.0.1:8025, no TLS, writing var/mail/).
EMAIL_BACKEND = env.str("EMAIL_BACKEND", default="django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = env.str("EMAIL_HOST", default="127.0.0.1")
EMAIL_PORT = env.int("EMAIL_PORT", default=8025)
EMAIL_USE_TLS = env.bool("EMAIL_USE_TLS", default=False)
EMAIL_USE_SSL = env.bool("EMAIL_USE_SSL", default=False)
EMAIL_HOST_USER = env.str("EMAIL_HOST_USER", default="")
EMAIL_HOST_PASSWORD = env.str("EMAIL_HOST_PASSWORD", default="")
EMAIL_TIMEOUT = env.int("EMAIL_TIMEOUT", default=30)  # a hung server is a transient failure
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="rcubench <rcubench@localhost>")
RCUBENCH_MAIL_FROM = env.str("RCUBENCH_MAIL_FROM", default=DEFAULT_FROM_EMAIL)
# The right-hand side of rcubench's own Message-IDs (default: the From address's domain).
RCUBENCH_MAIL_DOMAIN = env.str(
    "RCUBENCH_MAIL_DOMAIN",
    default=RCUBENCH_MAIL_FROM.rpartition("@")[2].strip(" >") or "localhost",
)
# Mail commands (webapp/alerts/listener.py): where `manage.py mail_listener` takes mail from
# the MTA by LMTP (make up starts it; point the MTA's transport for rcubench's address here).
RCUBENCH_INBOUND_LMTP = env.str("RCUBENCH_INBOUND_LMTP", default="127.0.0.1:8024")
# Transient SMTP failures (4xx, refused or timed-out connections) are retried this many
# times, the n-th after about RETRY_BACKOFF * 2**n seconds (jittered, at most an hour).
RCUBENCH_MAIL_MAX_RETRIES = env.int("RCUBENCH_MAIL_MAX_RETRIES", default=8)
RCUBENCH_MAIL_RETRY_BACKOFF_SECONDS = env.int("RCUBENCH_MAIL_RETRY_BACKOFF_SECONDS", default=60)
