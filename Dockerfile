# s3gw in a container. With docker compose: `docker compose up -d` (see docker-compose.yml).
# Without (the volume name is the one docker-compose.yml gives its volume, so both see the
# same data):
#   docker build -t s3gw:local .
#   docker run -d --name s3gw -p 127.0.0.1:9000:9000 -v s3gw-data:/data s3gw:local
#   docker run --rm -v s3gw-data:/data s3gw:local credentials   # the keys, as exports
#   docker stop -t 35 s3gw      # drain 5 s + shutdown 25 s; docker's default 10 s can cut an upload

# The base, pinned to a Python minor version and a Debian release: a rebuild never moves to
# another Python or Debian unnoticed. `docker compose build --pull` takes the same tag's
# security updates; a newer one is a deliberate change, here or for one build:
#   docker compose build --pull --build-arg BASE=python:3.13-slim-trixie
ARG BASE=python:3.11-slim-bookworm
FROM ${BASE}

# Logs reach `docker logs` as they are written; no .pyc files written at run time (the root
# file system is read-only under docker-compose.yml).
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1

# The gateway never runs as root. A fixed uid/gid, so that a host folder mounted at /data
# instead of the named volume can be given to it: chown 10001:10001 DIR.
# /data is created here, owned by that user, before VOLUME: a new named volume starts as a
# copy of it (owner and mode included), so the gateway can write to it.
RUN groupadd --system --gid 10001 s3gw \
 && useradd --system --uid 10001 --gid s3gw --home-dir /data --no-create-home \
        --shell /usr/sbin/nologin s3gw \
 && mkdir /data \
 && chown s3gw:s3gw /data \
 && chmod 0700 /data

# The package and its runtime dependencies; no test extra. The build's by-products (build/,
# *.egg-info) go in the same layer as they are made.
WORKDIR /src
COPY . .
RUN pip install --no-cache-dir --disable-pip-version-check . \
 && rm -rf build ./*.egg-info

VOLUME /data
ENV S3GW_DATA=/data \
    S3GW_ADDRESS=0.0.0.0:9000
EXPOSE 9000
USER 10001:10001
# Not /src: `python -m gateway` would find the sources before the installed package.
WORKDIR /data

# Ready means the catalog and the data folder take writes. The probe reads the same S3GW_*
# variables as the gateway: its port, and HTTPS (trusting the gateway's own certificate) when
# TLS is on.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-m", "gateway.healthcheck"]

# Exec form: the gateway is PID 1 and gets `docker stop`'s SIGTERM itself (it shuts down
# cleanly on it). Another subcommand replaces CMD: `docker run ... s3gw:local fsck --deep`.
ENTRYPOINT ["s3gw"]
CMD ["serve"]
