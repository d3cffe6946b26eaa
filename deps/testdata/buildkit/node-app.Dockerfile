ARG NODE_VERSION=20.14
ARG DEBIAN=bookworm
FROM node:${NODE_VERSION}-${DEBIAN}-slim AS base
ENV PNPM_HOME="/pnpm"
ENV PATH="$PNPM_HOME:$PATH"
RUN corepack enable
WORKDIR /app

FROM base AS deps
COPY package.json pnpm-lock.yaml ./
RUN --mount=type=cache,id=pnpm,target=/pnpm/store pnpm install --frozen-lockfile

FROM base AS build
COPY --from=deps /app/node_modules ./node_modules
COPY . .
RUN pnpm run build

FROM gcr.io/distroless/nodejs20-debian12:nonroot
COPY --from=build /app/dist /app
CMD ["/app/server.js"]
