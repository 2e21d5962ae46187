# coremem in one image: the API (`coremem serve`), the worker (`coremem worker`) and the dashboard
# (`coremem dashboard`) are the same installed package started with different commands (docker-compose.yml).

# Build stage: the package and its dependencies, installed (not editable) into a virtual environment.
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/coremem
WORKDIR /src
COPY pyproject.toml README.md ./
COPY backend ./backend
COPY dashboard ./dashboard
COPY shared ./shared
RUN /opt/coremem/bin/pip install --upgrade pip && /opt/coremem/bin/pip install '.[local]' \
 && /opt/coremem/bin/coremem --help > /dev/null

# Run stage: the environment alone, owned by root and run by an unprivileged user.
FROM python:3.11-slim
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /home/coremem coremem \
 && mkdir /data && chown coremem:coremem /data
COPY --from=build /opt/coremem /opt/coremem
ENV PATH=/opt/coremem/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    CORE_DATA_DIR=/data
USER coremem
WORKDIR /home/coremem
EXPOSE 8000 8501
CMD ["coremem", "serve", "--host", "0.0.0.0", "--port", "8000"]
