FROM python:3.11-slim
WORKDIR /srv/halfmq
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 HALFMQ_HOST=0.0.0.0 HALFMQ_PORT=8080
COPY pyproject.toml README.md ./
COPY app ./app
COPY half_store ./half_store
COPY checker ./checker
COPY sdk ./sdk
COPY spark_ingest ./spark_ingest
COPY migrations ./migrations
COPY bench ./bench
RUN pip install --no-cache-dir .
EXPOSE 8080 8081
HEALTHCHECK --interval=10s --timeout=3s CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/readyz')"
CMD ["halfmq", "serve"]
