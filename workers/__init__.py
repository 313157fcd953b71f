"""The Celery worker: the app with its task modules, time limits and beat schedule
(celery_app.py), the thin tasks that call the web app's services (tasks/), the start-up
clean-up and the serving bootstep. The top floor: nothing imports it."""
