"""A perf script's own PostgreSQL database on the machine's server, made afresh."""

import psycopg

from perf._local import database_url


def reset_database(name: str, create: bool) -> None:
    """Drop database `name` (closing this process's Django connections first when Django
    is set up), and make it afresh if `create`."""
    if not create:
        from django.db import connections

        connections.close_all()
    with psycopg.connect(database_url("postgres"), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        if create:
            conn.execute(f"CREATE DATABASE {name}")
