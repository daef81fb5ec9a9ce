/**
 * @module bench/scenarios — the scenarios of issue 5, in report order. `--only` selects by id.
 */
import type { Scenario } from '../lib/context.js';
import { baselineScenario } from './baseline.js';
import { cacheScenario } from './cache.js';
import { contentScenario } from './content.js';
import { documentsScenario } from './documents.js';
import { engineScenario } from './engine.js';
import { engineLayoutScenario } from './engine-layout.js';
import { familiesScenario } from './families.js';
import { goodputScenario } from './goodput.js';
import { inlineScenario } from './inline.js';
import { isolationScenario } from './isolation.js';
import { memoryScenario } from './memory.js';
import { officeScenario } from './office.js';
import { overheadScenario } from './overhead.js';
import { policyScenario } from './policy.js';
import { routerHopScenario } from './router-hop.js';
import { servingScenario } from './serving.js';

export const SCENARIOS: Scenario[] = [
  engineScenario,
  servingScenario,
  baselineScenario,
  policyScenario,
  memoryScenario,
  overheadScenario,
  goodputScenario,
  documentsScenario,
  routerHopScenario,
  cacheScenario,
  isolationScenario,
  engineLayoutScenario,
  contentScenario,
  officeScenario,
  familiesScenario,
  inlineScenario,
];
