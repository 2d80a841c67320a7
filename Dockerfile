# One image for `noisyloop api` and `noisyloop worker` (and `noisyloop serve`).
# Stage 1 builds wheels; stage 2 is a slim runtime with a non-root user.
FROM python:3.11-slim AS build
WORKDIR /src
RUN pip install --no-cache-dir --upgrade pip wheel
COPY pyproject.toml README.md ./
COPY app ./app
COPY workers ./workers
COPY clients/python ./clients/python
# The server and the client (for `noisyloop log export`), both from this checkout, with the
# Kafka client (the feedback consumer of NOISYLOOP_KAFKA_BOOTSTRAP); the image leaves out
# the `lab` extra (plots and progress bars), which the service never uses.
RUN pip wheel --no-cache-dir --wheel-dir /wheels ./clients/python '.[kafka]'

FROM python:3.11-slim AS runtime
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    NOISYLOOP_HOST=0.0.0.0 \
    NOISYLOOP_PORT=8000
RUN useradd --create-home --uid 10001 noisyloop
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER noisyloop
WORKDIR /home/noisyloop
EXPOSE 8000 9100
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD python -c "import os,urllib.request,sys; p=os.environ.get('NOISYLOOP_PORT','8000'); sys.exit(0 if urllib.request.urlopen(f'http://127.0.0.1:{p}/healthz', timeout=2).status == 200 else 1)"
ENTRYPOINT ["noisyloop"]
CMD ["api", "--host", "0.0.0.0", "--port", "8000"]
