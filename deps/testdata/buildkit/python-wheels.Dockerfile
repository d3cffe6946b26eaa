ARG PYTHON_VERSION=3.12
ARG REGISTRY=registry.example.com
FROM ${REGISTRY}/infra/images/python-build:${PYTHON_VERSION} AS wheels
WORKDIR /w
COPY requirements.txt .
RUN pip wheel --wheel-dir /w/wheels -r requirements.txt

FROM python:${PYTHON_VERSION}-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
RUN --mount=type=bind,from=wheels,source=/w/wheels,target=/wheels \
    pip install /wheels/*
COPY --from=ghcr.io/astral-sh/uv:0.4.18 /uv /usr/local/bin/uv
COPY . /app
