/**
 * @module scripts/make-demo-model — build a generated model folder: `make-demo-model <preset> [outDir]`.
 * Presets: tiny (tests, `npm start`), tiny-joinable (tiny with a decoder that lets rows join a running
 * batch), tiny-nllb, tiny-nllb-legacy, tiny-mbart50, tiny-opus-mt-en-de (the other families on tiny's shapes),
 * m2m100-418m (M2M100-418M's shapes, random weights, ~4 GB with the int8 files: benchmarks; never committed),
 * opus-mt-en-de (Helsinki-NLP/opus-mt-en-de's shapes, ~0.5 GB with the int8 files). Each is written in the published layout: fp32 with inline weights, plus the q8 and q8-rows pairs.
 * After writing, the folder is loaded into onnxruntime-node and one row is translated, so a broken
 * model is caught here rather than at serving time (`--no-check` skips that).
 */
import path from 'node:path';
import { TranslationEngine } from '../model-server/engine/engine.js';
import { makeDemoModel, PRESETS } from '../model-server/tools/demo-model/index.js';

async function main(argv: string[]): Promise<number> {
  const args = argv.filter((a) => !a.startsWith('--'));
  const check = !argv.includes('--no-check');
  const [preset, outArg] = args;
  if (preset === undefined || argv.includes('--help') || PRESETS[preset] === undefined) {
    console.error(
      `usage: scripts/make-demo-model <preset> [outDir] [--no-check]\npresets: ${Object.keys(PRESETS).join(', ')}`,
    );
    return preset === undefined || argv.includes('--help') ? 2 : 1;
  }
  const outDir = path.resolve(outArg ?? path.join('models', preset));
  const summary = makeDemoModel(preset, outDir);
  console.log(
    `${summary.preset}: ${summary.writtenParameters.toLocaleString('en-US')} parameters written ` +
      `(formula: ${summary.parameters.toLocaleString('en-US')}), ${summary.files.length} files in ${outDir} ` +
      `(${(summary.buildMs / 1000).toFixed(1)} s)`,
  );
  if (!check) return 0;
  const started = performance.now();
  const engine = await TranslationEngine.load({ modelDir: outDir });
  try {
    const loadMs = performance.now() - started;
    // en → ko, or the one pair a Marian model serves.
    const tgtLang = engine.targetLanguages().includes('ko') ? 'ko' : engine.targetLanguages()[0]!;
    const [out] = await engine.translate([{ srcLang: 'en', text: 'Hello world.', tgtLang }], {
      numBeams: 1,
      maxNewTokens: 8,
    });
    console.log(
      `check: onnxruntime-node loaded it in ${(loadMs / 1000).toFixed(1)} s (${engine.decoderKind} decoder, ` +
        `${engine.dtypeChoice.reason}) and generated ` +
        `${out!.generatedTokens} tokens: ${JSON.stringify(out!.text)} (random weights: not a translation)`,
    );
  } finally {
    await engine.close();
  }
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  },
);
