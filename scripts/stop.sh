#!/usr/bin/env bash
# scripts/stop.sh — stop mt-serve's pm2 apps, draining: the front first (no new requests), then the router
# cluster (finishes what it accepted), then the model server (answers every queued job), and remove them from
# pm2's list. Other pm2 apps and the pm2 daemon itself are left alone. Safe to run when nothing is running.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PM2="$ROOT/node_modules/.bin/pm2"
[[ -x "$PM2" ]] || { echo "stop.sh: pm2 is not installed here: run \`npm ci\` first" >&2; exit 1; }

# Names of our apps pm2 knows about (in any state).
known="$("$PM2" jlist 2>/dev/null | node -e '
  let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
    let list = []; try { list = JSON.parse(s); } catch {}
    const names = new Set(list.map((p) => p.name));
    console.log(["front", "router", "model-server"].filter((n) => names.has(n)).join(" "));
  });')"
if [[ -z $known ]]; then
  echo "mt-serve is not running (pm2 knows none of front, router, model-server)"
  exit 0
fi
# One pm2 command for all three: `pm2 delete` stops each app as `pm2 stop` does (SIGINT, the app drains, kill_timeout
# bounds it) before removing it, one app after another in the order named. Each pm2 command is a Node start of its own.
printf '==> stopping %s (draining, in this order)\n' "$known"
# shellcheck disable=SC2086 # the names are words pm2 takes one by one
"$PM2" delete $known >/dev/null || { echo "stop.sh: pm2 could not stop and delete $known" >&2; exit 1; }
echo "mt-serve stopped"
