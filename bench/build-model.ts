/**
 * @module bench/build-model — child entry that writes a generated demo model (tools/demo-model) into a folder:
 * `node --import tsx bench/build-model.ts <preset name | preset JSON> <outDir>`. Run in its own process because
 * the 418M model streams gigabytes of weights; the parent renames the folder into place once it is complete.
 */
import { makeDemoModel, type DemoPreset } from '../model-server/tools/demo-model/index.js';

const [presetArg, outDir] = process.argv.slice(2);
if (!presetArg || !outDir) {
  process.stderr.write('usage: build-model.ts <preset name | preset JSON> <outDir>\n');
  process.exit(2);
}
const preset: string | DemoPreset = presetArg.startsWith('{') ? (JSON.parse(presetArg) as DemoPreset) : presetArg;
const summary = makeDemoModel(preset, outDir);
process.stdout.write(
  `${JSON.stringify({ preset: summary.preset, parameters: summary.parameters, buildMs: Math.round(summary.buildMs) })}\n`,
);
