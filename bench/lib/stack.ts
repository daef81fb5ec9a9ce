/**
 * @module bench/lib/stack — the stack a bench scenario measures: harness/stack.ts's `startMeasuredStack` (every
 * variable pinned, a router cluster on one port, the front a user gets) at this run's settings. The processes run from source through tsx, so the bench measures the tree as it is
 * without a build step; every one is stopped by `stack.stop()`, or by the bench's cleanup at the latest.
 */
import { startMeasuredStack, type MeasuredStackOptions, type Stack } from '../../harness/stack.js';
import type { BenchContext } from './context.js';

export type { Stack };

/**
 * A stack at this run's settings (batch size and delay, onnxruntime threads, output length) in the deployed layout
 * unless told otherwise: the translation handler, the front on top, immediate dispatch, one engine per device.
 */
export function startRunStack(
  ctx: BenchContext,
  options: Pick<MeasuredStackOptions, 'name' | 'modelDir' | 'languages'> &
    Partial<Omit<MeasuredStackOptions, 'workDir'>>,
): Promise<Stack> {
  const { settings } = ctx;
  return startMeasuredStack({
    workDir: ctx.workDir,
    handler: 'translation',
    layers: 'front',
    batchSize: settings.batchSize,
    maxBatchDelayMs: settings.maxBatchDelayMs,
    batchPolicy: 'immediate',
    engineSharing: 'device',
    intraOpThreads: settings.intraOpThreads,
    maxNewTokens: settings.newTokens,
    ...options,
  });
}
