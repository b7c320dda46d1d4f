# Loadline in one image: the simulator, the Locust master and the workers all run from it.
#   docker build -t loadline .
#   docker run --rm loadline loadline --help
#   docker run --rm -p 8089:8089 loadline locust -f locustfiles/chat.py --host http://TARGET:8000
# No ENTRYPOINT on purpose: compose files and k8s manifests give the whole command (`locust ...` or
# `loadline ...`), so the container runs exactly what deploy/README.md shows.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    MPLCONFIGDIR=/tmp/matplotlib

WORKDIR /loadline
COPY . .

# Editable: the image's source tree (/loadline) is what `locust -f locustfiles/...` in the compose
# files and k8s manifests reads, and what runs. (A plain `pip install .` works too: configs/ and
# locustfiles/ ship in the wheel, see loadline/core/resources.py.)
RUN pip install -e . \
 && useradd --create-home --uid 10001 loadline \
 && mkdir -p /runs && chown loadline /runs

# Non-root by default (k8s: runAsUser/fsGroup 10001). Compose overrides it for bind-mounted ./runs.
USER 10001
VOLUME ["/runs"]
# 8089 web UI, 5557 workers -> master, 8000 simulator, 9646 generator metrics (--metrics-port)
EXPOSE 8089 5557 8000 9646
CMD ["loadline", "--help"]
