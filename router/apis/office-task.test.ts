import { unzipSync } from 'fflate';
import { describe, expect, it } from 'vitest';
import { docxFile } from '../../harness/office-files.js';
import run, { BATCH_UNITS, type OfficeUnits, UNIT_SEPARATOR } from './office-task.js';

describe('office-task', () => {
  it('batches the units, at most BATCH_UNITS each, and counts their characters', () => {
    const docx = docxFile(Array.from({ length: 100 }, (_, i) => [`Paragraph ${i} is here.`]));
    const outcome = run({ name: 'plan', bytes: docx, kind: 'docx' });
    expect(outcome.ok).toBe(true);
    const { batches, characters } = (outcome as { value: OfficeUnits }).value;
    const units = batches.flatMap((batch) => batch.split(UNIT_SEPARATOR));
    expect(batches.map((batch) => batch.split(UNIT_SEPARATOR).length)).toEqual([BATCH_UNITS, 109 - BATCH_UNITS]);
    expect(units.slice(0, 2)).toEqual(['Paragraph 0 is here.', 'Paragraph 1 is here.']);
    expect(characters).toBe(units.join('').length);
  });

  it("renders a job's file from the plan it kept, once, then plans again", () => {
    const docx = docxFile([['Kept plan.']]);
    const units = (run({ name: 'plan', bytes: docx, kind: 'docx', keep: 'job-1' }) as { value: OfficeUnits }).value;
    const translations = units.batches.map((batch) => batch.toUpperCase());
    // Bytes that are no zip: only the kept plan can render them.
    const empty = new Uint8Array(0);
    const rendered = run({ name: 'render', bytes: empty, kind: 'docx', translations, keep: 'job-1' });
    const document = new TextDecoder().decode(
      unzipSync((rendered as { value: Uint8Array }).value)['word/document.xml'],
    );
    expect(document).toContain('>KEPT PLAN.<');
    expect(run({ name: 'render', bytes: empty, kind: 'docx', translations, keep: 'job-1' })).toEqual({
      ok: false,
      error: { code: 'BAD_REQUEST', message: expect.stringMatching(/^The file is not a readable zip archive/) },
    });
  });

  it('answers a refusal as its wire form', () => {
    expect(run({ name: 'plan', bytes: new Uint8Array([1, 2, 3]), kind: 'pptx' })).toEqual({
      ok: false,
      error: { code: 'BAD_REQUEST', message: expect.stringMatching(/^The file is not a readable zip archive/) },
    });
  });
});
