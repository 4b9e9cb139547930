# Keyward: one image, any number of nodes. Multi-stage on the official Bun image; runs as the
# unprivileged `bun` user; the container healthcheck is liveness (/healthz), load balancers should use
# /readyz (see deploy/haproxy.cfg).
# Build: docker build -t keyward .   Run a cluster: docker compose -f deploy/compose.yaml up

ARG BUN_VERSION=1.4.5

FROM oven/bun:${BUN_VERSION} AS deps
WORKDIR /app
COPY package.json bun.lock ./
# patches/: a fix to postgres.js applied at install (see docs/decisions.md)
COPY patches ./patches
# Production dependencies only, exactly as locked.
RUN bun install --frozen-lockfile --production

FROM oven/bun:${BUN_VERSION}-slim AS runtime
WORKDIR /app
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATA_DIR=/app/data
COPY --from=deps /app/node_modules ./node_modules
COPY package.json bun.lock ./
COPY sql ./sql
COPY src ./src
# Only the embedded mode writes to disk (DATA_DIR); cluster mode keeps nothing local.
RUN mkdir -p /app/data && chown bun:bun /app/data
USER bun
EXPOSE 3000
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["bun", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/healthz').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["bun", "src/main.ts"]
