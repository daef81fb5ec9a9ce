# syntax=docker/dockerfile:1
# mt-serve images (see docs/kubernetes.md). Stages:
#   build       npm ci (dev dependencies: TypeScript) + npm run build → dist/, and the model server container entry
#   prod-deps   npm ci --omit=dev: runtime dependencies only. .npmrc skips onnxruntime-node's CUDA download, so
#               onnxruntime-node carries its bundled CPU provider only
#   runtime     (default) node on Debian slim, non-root: the router (default command) and the CPU model server
#               (command: node dist/deploy/docker/model-server-entry.js)
#   gpu         the model server on CUDA 12 + cuDNN 9, with onnxruntime-node's CUDA provider installed
#
#   docker build -t mt-serve:0.1.0 .                       # router + CPU model server
#   docker build -t mt-serve-gpu:0.1.0 --target gpu .       # GPU model server (downloads the CUDA provider)
#
# No nginx in any image: in Kubernetes the ingress controller takes its place. Models are not in the images: the
# pods mount them from a volume (MODEL_DIR). Both images run as uid 1000, numeric so that runAsNonRoot can check it.
ARG NODE_IMAGE=node:20-bookworm-slim
ARG CUDA_IMAGE=nvidia/cuda:12.6.3-cudnn-runtime-ubuntu22.04

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
RUN npm ci
COPY . .
RUN npm run build && npx tsc -p deploy/docker/tsconfig.json

FROM ${NODE_IMAGE} AS prod-deps
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
# onnxruntime-node ships its native library for every platform (~290 MB); keep this one's (~45 MB).
RUN npm ci --omit=dev && npm cache clean --force \
  && cd node_modules/onnxruntime-node/bin/napi-v6 \
  && find . -mindepth 2 -maxdepth 2 -type d ! -path "./linux/$(node -p process.arch)" -exec rm -rf {} +

# The CUDA execution provider of onnxruntime-node (README "GPU notes"); needs network at build time.
FROM prod-deps AS prod-deps-cuda
RUN ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules/onnxruntime-node/script/install

FROM ${CUDA_IMAGE} AS gpu
COPY --from=build /usr/local/bin/node /usr/local/bin/node
RUN groupadd --gid 1000 node && useradd --uid 1000 --gid node --create-home --shell /usr/sbin/nologin node
WORKDIR /app
COPY --from=prod-deps-cuda /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json setup_config.json ./
RUN mkdir -p run model_store && chown 1000:1000 run model_store
ENV NODE_ENV=production
USER 1000:1000
EXPOSE 9999 8082
CMD ["node", "dist/deploy/docker/model-server-entry.js"]

FROM ${NODE_IMAGE} AS runtime
WORKDIR /app
COPY --from=prod-deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json setup_config.json ./
RUN mkdir -p run model_store && chown 1000:1000 run model_store
ENV NODE_ENV=production
USER 1000:1000
EXPOSE 8888 9999 8082
CMD ["node", "dist/router/main.js"]
