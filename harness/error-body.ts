/**
 * @module harness/error-body — the check every test makes of an error answer: its status, and its whole body in
 * TorchServe's shape `{code: <status>, type, message}` (STYLE.md: assert whole error bodies).
 */
import { expect } from 'vitest';

/** Asserts that `res` answered `status` with exactly `{code: status, type, message}` (reads the body). */
export async function expectErrorBody(res: Response, status: number, type: string, message: string): Promise<void> {
  expect(res.status).toBe(status);
  expect(await res.json()).toEqual({ code: status, type, message });
}

/**
 * What harness/http.ts `call` reads back from an error answer: `{status, body: {code: status, type, message}}`,
 * to compare with `toEqual`/`toMatchObject` (the latter lets headers through).
 */
export function errorAnswer(status: number, type: string, message: string) {
  return { status, body: { code: status, type, message } };
}
