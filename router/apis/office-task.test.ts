import { unzipSync } from 'fflate';
import { describe, expect, it } from 'vitest';
import { docxFile } from '../../harness/office-files.js';
import run, { BATCH_UNITS, type OfficeUnits, packLists, UNIT_SEPARATOR, unpackLists } from './office-task.js';

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

  it("places a paragraph's runs by the links each batch carries, packed in one array", () => {
    const units = [[0, 3, 0, 3, 4, 9, 4, 9], undefined, [], [1, 2, 3, 4]];
    expect(unpackLists(packLists(units))).toEqual(units);
    const docx = docxFile([['The quick ', 'brown', ' fox runs.']]);
    const { batches, edges } = (run({ name: 'plan', bytes: docx, kind: 'docx' }) as { value: OfficeUnits }).value;
    // Each unit's edges: where its runs after the first start (the body's paragraph; the fixture's "John Smith is
    // here today." in three runs); a unit of one run has none.
    const unitEdges = edges.flatMap(unpackLists);
    expect(unitEdges[0]).toEqual([10, 15]);
    expect(unitEdges[2]).toEqual([14, 18]);
    expect(unitEdges[1]).toEqual([]);
    // The translation is the source, each word linked to itself (what the copy model answers).
    const copy = (text: string) =>
      [...text.matchAll(/\S+/g)].flatMap(({ index, 0: word }) => [
        index,
        index + word.length,
        index,
        index + word.length,
      ]);
    const links = batches.map((batch) => packLists(batch.split(UNIT_SEPARATOR).map(copy)));
    const rendered = run({ name: 'render', bytes: docx, kind: 'docx', translations: batches, links });
    const document = new TextDecoder().decode(
      unzipSync((rendered as { value: Uint8Array }).value)['word/document.xml'],
    );
    expect(document).toContain(
      '<w:r><w:t xml:space="preserve">The quick </w:t></w:r><w:r><w:rPr><w:b/></w:rPr><w:t xml:space="preserve">brown</w:t></w:r>' +
        '<w:r><w:t xml:space="preserve"> fox runs.</w:t></w:r>',
    );
  });

  it('answers a refusal as its wire form', () => {
    expect(run({ name: 'plan', bytes: new Uint8Array([1, 2, 3]), kind: 'pptx' })).toEqual({
      ok: false,
      error: { code: 'BAD_REQUEST', message: expect.stringMatching(/^The file is not a readable zip archive/) },
    });
  });
});
