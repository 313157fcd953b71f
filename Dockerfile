# One image for web, beat and every worker queue (Debian 12, as the set-up script targets).
# BASE_IMAGE: the official debian:12-slim; where no registry can be reached,
# docker-compose.local-images.yml names one built locally by scripts/compose-images.sh.
ARG BASE_IMAGE=debian:12-slim
FROM ${BASE_IMAGE}

# What the workers run here: kernel builds (gcc, the ppc64le cross gcc, bubblewrap, ccache)
# and guest initramfs images (busybox-static and static guest programs of each arch, hence
# glibc for both: libc6-dev and libc6-dev-ppc64el-cross). No QEMU: a bench worker only hands
# domain XML to the host's libvirtd, which starts the host's QEMU (engine/vm/domain.py names
# /usr/bin/qemu-system-x86_64 and, for ppc64le, /opt/rcubench-qemu from scripts/qemu-ppc64.sh:
# the host must have them, see docs/compose.md). ppc64el's busybox-static is not installable
# beside amd64's, so it is unpacked where engine/vm/images.py looks for an image's own.
# A mirror caught mid-sync fails one index and `apt-get update` with it; install is the judge.
ENV DEBIAN_FRONTEND=noninteractive PYTHONUNBUFFERED=1 PATH=/opt/venv/bin:$PATH
RUN dpkg --add-architecture ppc64el && (apt-get update || true) && apt-get install -y --no-install-recommends \
        python3 python3-venv python3-dev gcc pkg-config git curl ca-certificates \
        libvirt-dev libvirt-clients \
        build-essential bc bison flex libelf-dev libssl-dev cpio kmod xz-utils rsync \
        ccache bubblewrap gcc-powerpc64le-linux-gnu libc6-dev-ppc64el-cross busybox-static \
    && cd /tmp && apt-get download busybox-static:ppc64el \
    && dpkg -x busybox-static_*_ppc64el.deb /tmp/busybox-ppc64el \
    && install -D -m 0755 /tmp/busybox-ppc64el/bin/busybox /usr/local/lib/rcubench/guest/ppc64le/busybox \
    && rm -rf /tmp/busybox-* /var/lib/apt/lists/*

WORKDIR /app
COPY requirements/ requirements/
RUN python3 -m venv /opt/venv \
    && pip install --no-cache-dir --use-pep517 -r requirements/base.txt -c requirements/constraints.txt
COPY . .
ENV STATIC_ROOT=/app/static
# The settings refuse to load without a secret key; this one exists only for this step (the
# containers get theirs from .env, see docker-compose.yml).
RUN DJANGO_SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput

# Fixed ids: the host's data directory (RCUBENCH_COMPOSE_DATA_DIR) is given to them, and the
# host knows them (scripts/setup.sh), as libvirtd refuses a client whose ids it cannot name.
ARG RCUBENCH_UID=10001
RUN groupadd --gid ${RCUBENCH_UID} rcubench \
    && useradd --uid ${RCUBENCH_UID} --gid ${RCUBENCH_UID} --create-home --home-dir /var/lib/rcubench rcubench
USER rcubench
EXPOSE 8000
CMD ["gunicorn", "webapp.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3"]
