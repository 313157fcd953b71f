"""WSGI entry point (gunicorn webapp.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
# The web server's few processes keep their database connections a minute (settings.py,
# DATABASE_CONN_MAX_AGE); the workers, which never load this module, close theirs.
os.environ.setdefault("DATABASE_CONN_MAX_AGE", "60")
application = get_wsgi_application()
