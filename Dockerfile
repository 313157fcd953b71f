# One image for web, beat and every worker queue (Debian 12, as the set-up script targets).
FROM debian:12-slim

ENV DEBIAN_FRONTEND=noninteractive PYTHONUNBUFFERED=1 PATH=/opt/venv/bin:$PATH
RUN apt-get update && apt-get install -y --no-install-recommends \
        python3 python3-venv python3-dev gcc pkg-config git curl ca-certificates \
        libvirt-dev libvirt-clients qemu-system-x86 qemu-system-ppc qemu-utils \
        build-essential bc bison flex libelf-dev libssl-dev cpio kmod xz-utils rsync \
        ccache bubblewrap gcc-powerpc64le-linux-gnu busybox-static \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY requirements/ requirements/
RUN python3 -m venv /opt/venv \
    && pip install --no-cache-dir --use-pep517 -r requirements/base.txt -c requirements/constraints.txt
COPY . .
ENV STATIC_ROOT=/app/static
# The settings refuse to load without a secret key; this one exists only for this step (the
# containers get theirs from .env, see docker-compose.yml).
RUN DJANGO_SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput

RUN useradd --system --create-home --home-dir /var/lib/rcubench rcubench
USER rcubench
EXPOSE 8000
CMD ["gunicorn", "webapp.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3"]
