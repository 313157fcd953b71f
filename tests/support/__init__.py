"""Test support shared by the suite: factory_boy factories, the headless-Chromium plugin and
the real Celery worker-process harness."""
