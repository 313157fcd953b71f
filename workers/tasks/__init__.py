"""Celery task modules: thin wrappers that load ids and call services or the engine."""
