"""How a build can fail: the codes of BuildError, stored as Build.error_code.

A module of its own, with no imports, so that the models can name these codes without
loading the build engine (engine/build/builder.py imports it).
"""

FETCH_FAILED = "fetch-failed"
BAD_REF = "bad-ref"
PATCH_FAILED = "patch-failed"
CONFIG_DROPPED = "config-dropped"
MAKE_FAILED = "make-failed"
TIMEOUT = "timeout"
NO_SPACE = "no-space"
INFRA = "infra-error"
