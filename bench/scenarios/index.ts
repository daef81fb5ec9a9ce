/**
 * @module bench/scenarios — the scenarios of issue 5, in report order. `--only` selects by id.
 */
import type { Scenario } from '../lib/context.js';
import { engineScenario } from './engine.js';

export const SCENARIOS: Scenario[] = [engineScenario];
