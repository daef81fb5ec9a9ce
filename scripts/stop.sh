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
for app in $known; do
  printf '==> stopping %s (draining)\n' "$app"
  "$PM2" stop "$app" >/dev/null || { echo "stop.sh: pm2 could not stop $app" >&2; exit 1; }
  "$PM2" delete "$app" >/dev/null || { echo "stop.sh: pm2 could not delete $app" >&2; exit 1; }
done
echo "mt-serve stopped"
