# An Eddies worker image: `docker compose up` runs it next to Apache Kafka.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY eddies eddies
COPY events events
COPY engine engine
COPY connectors connectors
COPY schemas schemas
RUN pip install --no-cache-dir '.[litellm]'
ENV LITELLM_LOCAL_MODEL_COST_MAP=True LITELLM_OFFLINE_MODE=true
ENTRYPOINT ["eddies"]
CMD ["worker"]
