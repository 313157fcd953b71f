"""rcubench workers: the Celery app and its thin task modules, and the execution engine
(build/, vm/, lab/), which never imports Django so it runs and is tested without a database."""
