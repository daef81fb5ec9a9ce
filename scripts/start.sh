#!/usr/bin/env bash
# scripts/start.sh [new] [--role all|model-server|router] — start mt-serve under pm2: model server, router cluster,
# front on FRONT_ADDRESS (7777).
# The seed's torchserve.sh, with its `new` flag:
#   new   stop a running stack, remove LOG_DIR and MODEL_STORE, generate the demo model if MODEL_DIR is absent,
#         archive one store entry per language of setup_config.json
#   then  build if dist/ is missing or stale, start (or reload) the pm2 apps, wait for the model server's /ping,
#         register every language with BATCH_SIZE / MAX_BATCH_DELAY_MS, wait for the front, send one test
#         translation through it, and print where to POST.
# --role (default all) starts one host's part of a stack spread over several machines (README "Several hosts"):
#   model-server  the model server alone: archive, start, register every language of SETUP_CONFIG, one test
#                 translation on its inference port (INFERENCE_ADDRESS, which must listen where the router reaches it)
#   router        the router cluster and the front, no model server (MODEL_SERVERS names the model-server hosts); one
#                 test translation through the front. Start order does not matter: model servers not answering yet
#                 are listed, and the router serves each language as soon as a model server reports it ready.
# Without `new`, a model server that was running before (a reboot, a crash, `npm stop`) registers again the models
# it had, with their settings, from its snapshot in LOG_DIR/config; the registrations below then answer 409.
# Configuration: .env (see .env.example) overlaid by the environment, resolved by the same loader the servers
# use (dist/scripts/config-env.js). Safe to run twice. Any failed step stops with a message and a non-zero exit.
set -euo pipefail

usage() { echo "usage: scripts/start.sh [new] [--role all|model-server|router]" >&2; }
NEW=0
ROLE=all
while (($# > 0)); do
  case "$1" in
    new) NEW=1 ;;
    --role)
      ROLE="${2:-}"
      shift
      ;;
    --role=*) ROLE="${1#--role=}" ;;
    -h | --help) usage; exit 0 ;;
    *) usage; exit 2 ;;
  esac
  shift
done
case "$ROLE" in
  all) APPS="model-server,router,front" ;;
  model-server) APPS="model-server" ;;
  router) APPS="router,front" ;;
  *) usage; exit 2 ;;
esac
has_model_server() { [[ $ROLE != router ]]; }
has_front() { [[ $ROLE != model-server ]]; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PM2="$ROOT/node_modules/.bin/pm2"

step() { printf '\033[1m==>\033[0m %s\n' "$*"; }
die() {
  printf 'start.sh: %s\n' "$*" >&2
  exit 1
}
[[ -x "$PM2" ]] || die "pm2 is not installed here: run \`npm ci\` first"
command -v curl >/dev/null || die "curl is required"

# --- build -----------------------------------------------------------------------------------------------
# `npm run build` touches dist/.build-stamp when tsc succeeds; a source newer than it means dist/ is stale.
stale() {
  [[ ! -f dist/.build-stamp ]] || [[ -n "$(find common router front model-server scripts package.json tsconfig.json \
    tsconfig.build.json -newer dist/.build-stamp \( -name '*.ts' -o -name '*.json' \) -not -path '*/test/*' \
    -not -name '*.test.ts' -print -quit)" ]]
}
build() {
  if stale; then
    step "building (npm run build)"
    npm run --silent build || die "the build failed (see the TypeScript errors above)"
  fi
}
if stale; then
  mkdir -p dist
  if command -v flock >/dev/null; then
    # Two starts at once (parallel test files) must not both write dist/: the second waits, then finds it fresh.
    exec 9>dist/.build-lock
    flock 9
    build
    flock -u 9
  else
    build
  fi
fi

# --- configuration ---------------------------------------------------------------------------------------
config="$(node dist/scripts/config-env.js)" || die "invalid configuration (see above); edit .env"
eval "$config"
read -r -a languages <<<"$MT_LANGUAGES"
auth=()
mgmt_auth() {
  # TOKEN_AUTH: the management key from KEY_FILE (written by the model server at start).
  if [[ $MT_TOKEN_AUTH == true ]]; then
    local key
    key="$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).management.key)' "$MT_KEY_FILE")" ||
      die "TOKEN_AUTH=true but no management key in $MT_KEY_FILE"
    auth=(-H "Authorization: Bearer $key")
  fi
}

running() { "$PM2" jlist 2>/dev/null | node -e '
  let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
    let list = []; try { list = JSON.parse(s); } catch {}
    const ours = list.filter((p) => ["model-server", "router", "front"].includes(p.name) && p.pm2_env.status === "online");
    process.exit(ours.length > 0 ? 0 : 1);
  });'; }

# --- new: a clean slate ----------------------------------------------------------------------------------
if [[ $NEW == 1 ]]; then
  if running; then
    step "stopping the running stack first"
    bash scripts/stop.sh
  fi
  if [[ -d $MT_LOG_DIR ]]; then rm -rf "$MT_LOG_DIR" && echo "removed $MT_LOG_DIR"; fi
  if [[ -d $MT_MODEL_STORE ]]; then rm -rf "$MT_MODEL_STORE" && echo "removed $MT_MODEL_STORE"; fi
fi

if has_model_server && [[ ! -d $MT_MODEL_DIR ]]; then
  preset="$(basename "$MT_MODEL_DIR")"
  case "$preset" in
    tiny | tiny-joinable | tiny-nllb | tiny-mbart50 | m2m100-418m)
      step "generating the demo model '$preset' into $MT_MODEL_DIR (random weights: output is not a real translation)"
      scripts/make-demo-model "$preset" "$MT_MODEL_DIR" || die "could not generate the demo model"
      ;;
    *) die "MODEL_DIR=$MT_MODEL_DIR does not exist: point it at an ONNX export (scripts/download-model.sh) or at models/tiny" ;;
  esac
fi

missing=0
for lang in "${languages[@]}"; do [[ -f $MT_MODEL_STORE/$lang/MAR-INF/MANIFEST.json ]] || missing=1; done
if has_model_server && [[ $missing == 1 ]]; then
  step "archiving ${#languages[@]} languages into $MT_MODEL_STORE"
  node dist/model-server/cli.js archive --model-dir "$MT_MODEL_DIR" --store "$MT_MODEL_STORE" \
    --setup-config "$MT_SETUP_CONFIG" >/dev/null || die "archiving the model store failed"
fi

# --- pm2 -------------------------------------------------------------------------------------------------
mkdir -p "$MT_LOG_DIR"
if running; then
  step "reloading the running stack (pm2 startOrReload, $APPS)"
  "$PM2" startOrReload ecosystem.config.js --only "$APPS" --update-env >/dev/null || die "pm2 could not reload the apps (npx pm2 logs)"
else
  step "starting the stack (pm2 start ecosystem.config.js, $APPS)"
  "$PM2" start ecosystem.config.js --only "$APPS" --update-env >/dev/null || die "pm2 could not start the apps (npx pm2 logs)"
fi

# Polls `curl ARGS…` until it prints HTTP 200, for at most $1 seconds.
wait_http() {
  local seconds=$1
  shift
  local deadline=$((SECONDS + seconds))
  until [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$@" || true)" == 200 ]]; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

lang="${languages[0]}"
example="{\"src_lang\":\"en\",\"src_text\":\"Hello, world!\",\"tgt_lang\":\"$lang\"}"
if has_model_server; then
  step "waiting for the model server ($MT_INFERENCE_URL/ping)"
  wait_http 60 "$MT_INFERENCE_URL/ping" ||
    die "the model server did not answer /ping within 60 s; see $MT_LOG_DIR/model-server-error.log"

  mgmt_auth
  step "registering ${#languages[@]} languages (batch_size=$MT_BATCH_SIZE, max_batch_delay=$MT_MAX_BATCH_DELAY_MS ms)"
  for lang in "${languages[@]}"; do
    url="$MT_MANAGEMENT_URL/models?url=$lang&batch_size=$MT_BATCH_SIZE&max_batch_delay=$MT_MAX_BATCH_DELAY_MS&initial_workers=1&synchronous=true"
    body="$(mktemp)"
    code="$(curl -s -o "$body" -w '%{http_code}' -X POST "${auth[@]}" "$url" || echo 000)"
    case "$code" in
      200) printf '  %-4s registered\n' "$lang" ;;
      409) printf '  %-4s already registered\n' "$lang" ;;
      *)
        cat "$body" >&2
        rm -f "$body"
        die "registering '$lang' failed with HTTP $code; see $MT_LOG_DIR/model-server-error.log"
        ;;
    esac
    rm -f "$body"
  done
  lang="${languages[0]}"

  # The weights the engine chose (MODEL_DTYPE=auto picks int8 on the CPU when the model folder has those files).
  dtype="$(curl -s "${auth[@]}" "$MT_MANAGEMENT_URL/models/$lang" |
    node -e 'let s="";process.stdin.on("data",(d)=>(s+=d)).on("end",()=>{try{console.log(JSON.parse(s)[0].engine.dtype??"?")}catch{console.log("?")}})')"
fi

if [[ $ROLE == model-server ]]; then
  inference_auth=()
  if [[ $MT_TOKEN_AUTH == true ]]; then
    key="$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).inference.key)' "$MT_KEY_FILE")"
    inference_auth=(-H "Authorization: Bearer $key")
  fi
  body='{"src_lang":"en","src_text":"Hello, world!"}'
  reply="$(curl -s -w '\n%{http_code}' -X POST "${inference_auth[@]}" -H 'content-type: application/json' -d "$body" "$MT_INFERENCE_URL/predictions/$lang")"
  [[ "${reply##*$'\n'}" == 200 ]] || die "a test translation on the inference port failed: ${reply%$'\n'*}"
  echo
  echo "mt-serve model-server host is ready: $MT_INFERENCE_URL, ${#languages[@]} languages: $MT_LANGUAGES, weights $dtype (MODEL_DTYPE=${MT_MODEL_DTYPE:-auto})"
  echo "  routers reach it at INFERENCE_ADDRESS's port on this machine's address (list it in their MODEL_SERVERS)"
  echo "  → ${reply%$'\n'*}"
  echo "  logs: $MT_LOG_DIR (npx pm2 logs) · GPUs and queues: scripts/gpu-watch · stop: npm stop"
  exit 0
fi

# Polls `curl ARGS…` until it gets any HTTP answer, for at most $1 seconds.
wait_answer() {
  local seconds=$1
  shift
  local deadline=$((SECONDS + seconds))
  until [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$@" || true)" != 000 ]]; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

# Whether any model server of MODEL_SERVERS answers /ping from this host (healthy or not).
any_model_server_answers() {
  local url
  for url in $MT_MODEL_SERVERS; do
    [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$url/ping" || true)" != 000 ]] && return 0
  done
  return 1
}

# Each model server of MODEL_SERVERS as this host reaches it: "URL  answering" or "URL  not answering (why)".
model_server_report() {
  local url rc code
  for url in $MT_MODEL_SERVERS; do
    rc=0
    code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$url/ping")" || rc=$?
    case "$rc" in
      0) [[ $code == 200 ]] && printf '  %s  answering\n' "$url" || printf '  %s  answers /ping %s (unhealthy)\n' "$url" "$code" ;;
      6) printf '  %s  not answering (its name does not resolve)\n' "$url" ;;
      7) printf '  %s  not answering (connection refused: no model server listens there yet)\n' "$url" ;;
      28) printf '  %s  not answering (timed out: host down, or a firewall in between)\n' "$url" ;;
      *) printf '  %s  not answering (curl exit %s)\n' "$url" "$rc" ;;
    esac
  done
}

step "waiting for the front ($MT_FRONT_URL/health)"
wait_answer 30 "$MT_FRONT_URL/health" ||
  die "the front did not answer on $MT_FRONT_URL within 30 s; see $MT_LOG_DIR/front-error.log"
front="$(curl -s -D - -o /dev/null "$MT_FRONT_URL/health" | tr -d '\r' | sed -n 's/^x-front: //Ip')"
# The router needs a few seconds to find model servers that answer; a router host none of whose model servers
# answers here yet has nothing to wait for.
health_wait=10
if [[ $ROLE == router ]] && ! any_model_server_answers; then health_wait=2; fi
if ! wait_http "$health_wait" "$MT_FRONT_URL/health"; then
  health="$(curl -s --max-time 3 "$MT_FRONT_URL/health" || true)"
  [[ $health == *'"modelServer":"Unreachable"'* ]] ||
    die "the front answers but the router behind it does not ($health); see $MT_LOG_DIR/router-error.log"
  if [[ $ROLE != router ]]; then
    die "the router does not reach the model server ($MT_MODEL_SERVERS); see $MT_LOG_DIR/router-error.log"
  fi
  echo
  echo "mt-serve router host is up: front ${front:-?} on $MT_FRONT_URL → router, waiting for its model servers:"
  model_server_report
  echo "  It serves each language as soon as a model server reports it ready (until then: 503 + Retry-After)."
  echo "  Start them with scripts/start.sh --role model-server on their hosts; nothing needs restarting here."
  echo "  logs: $MT_LOG_DIR (npx pm2 logs) · stop: npm stop"
  exit 0
fi

reply="$(curl -s -w '\n%{http_code}' -X POST -H 'content-type: application/json' -d "$example" "$MT_FRONT_URL/")"
if [[ "${reply##*$'\n'}" == 503 && $ROLE == router ]]; then
  echo
  echo "mt-serve router host is up: front ${front:-?} on $MT_FRONT_URL → router; '$lang' is not ready on any model server yet:"
  echo "  → ${reply%$'\n'*}"
  model_server_report
  echo "  It serves each language as soon as a model server reports it ready; nothing needs restarting here."
  exit 0
fi
[[ "${reply##*$'\n'}" == 200 ]] || die "a test translation through the front failed: ${reply%$'\n'*}"

instances="$("$PM2" jlist | node -e 'let s="";process.stdin.on("data",(d)=>(s+=d)).on("end",()=>console.log(JSON.parse(s).filter((p)=>p.name==="router").length))')"
echo
if [[ $ROLE == all ]]; then
  echo "mt-serve is ready: front ${front:-?} on $MT_FRONT_URL → router ×$instances → model server ($MT_INFERENCE_URL), ${#languages[@]} languages: $MT_LANGUAGES, weights $dtype (MODEL_DTYPE=${MT_MODEL_DTYPE:-auto})"
else
  echo "mt-serve router host is ready: front ${front:-?} on $MT_FRONT_URL → router ×$instances → the model servers of MODEL_SERVERS, ${#languages[@]} languages accepted: $MT_LANGUAGES"
fi
echo "  curl -s -X POST $MT_FRONT_URL -d '$example'"
echo "  → ${reply%$'\n'*}"
echo "  logs: $MT_LOG_DIR (npx pm2 logs) · GPUs and queues: scripts/gpu-watch · stop: npm stop"
