// bench/gpu/bundle.mjs OUT — one ESM file of the compiled driver (dist/bench/gpu/driver.js) and everything it imports
// but onnxruntime-node, which the kit carries (scripts/gpu-bench-kit). Run after `npm run build`.
import { build } from 'esbuild';

const out = process.argv[2];
if (!out) {
  console.error('usage: node bench/gpu/bundle.mjs OUT');
  process.exit(2);
}
// protobufjs finds `long` through a dynamic require that a bundle cannot follow; without it int64 fields of the
// ONNX graphs decode unlike the unbundled engine's. A static require keeps it.
const inquire = {
  name: 'inquire-long',
  setup(b) {
    b.onResolve({ filter: /^@protobufjs\/inquire$/ }, () => ({ path: 'inquire', namespace: 'inquire-long' }));
    b.onLoad({ filter: /.*/, namespace: 'inquire-long' }, () => ({
      contents: "module.exports = (name) => (name === 'long' ? require('long') : null);",
      loader: 'js',
      resolveDir: process.cwd(),
    }));
  },
};
await build({
  entryPoints: ['dist/bench/gpu/driver.js'],
  outfile: out,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  external: ['onnxruntime-node'],
  banner: { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" },
  plugins: [inquire],
  logLevel: 'warning',
});
