// bench/gpu/stack-files.mjs — the files the GPU benchmark's served arm takes along (scripts/gpu-bench-kit packs them
// into stack.tar.xz): the compiled tree, package.json, and the production modules the stack loads, one path a line
// relative to the repository root. Left out: onnxruntime-node and onnxruntime-common (the kit carries them trimmed to
// linux x64, bench/gpu/run.sh links them in), pm2 and what only it needs (the served arm runs the processes itself),
// and source maps. Run after `npm run build`.
import { execFileSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';

const LEFT_OUT = new Set(['onnxruntime-node', 'onnxruntime-common', 'onnxruntime-web', 'pm2']);
const root = process.cwd();
const tree = JSON.parse(execFileSync('npm', ['ls', '--omit=dev', '--all', '--long', '--json'], { encoding: 'utf8' }));
const dirs = new Set();
const walk = (deps) => {
  for (const [name, dep] of Object.entries(deps ?? {})) {
    if (LEFT_OUT.has(name) || dep.path === undefined || dirs.has(dep.path)) continue;
    dirs.add(dep.path);
    walk(dep.dependencies);
  }
};
walk(tree.dependencies);
const files = [];
const add = (dir, skipNested) => {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      // A package's own node_modules holds packages listed (or left out) on their own.
      if (skipNested && entry.name === 'node_modules') continue;
      add(full, skipNested);
    } else if (entry.isFile() && !entry.name.endsWith('.map')) files.push(path.relative(root, full));
  }
};
for (const dir of dirs) add(dir, true);
add(path.join(root, 'dist'), false);
files.push('package.json', 'nginx/nginx.conf');
for (const file of files) statSync(path.join(root, file));
process.stdout.write(`${files.join('\n')}\n`);
