/**
 * inline-tags.ts through planMarkup: a block's run of text and inline elements is one unit, and the render puts each
 * element on the target words its source words are linked to (links given here as a model's alignment would give
 * them), once, properly nested, tags byte for byte; code, `translate="no"` and misnested markup end a run.
 */
import { parseFragment } from 'parse5';
import { describe, expect, it } from 'vitest';
import { joinLinks, piecesCut, wholeLink } from './inline-tags.js';
import { planMarkup } from './markup.js';

/** Links of each target word to a source word, by the words' text (each word's first occurrence from the left). */
function wordLinks(source: string, target: string, pairs: [string, string][]): number[] {
  const links: number[] = [];
  for (const [to, from] of pairs) {
    const t = target.indexOf(to);
    const s = source.indexOf(from);
    links.push(t, t + to.length, s, s + from.length);
  }
  return links;
}

describe('inline elements placed by the word alignment', () => {
  it('a reordering translation carries each element onto its own words', () => {
    const plan = planMarkup('<p>Click <b>here</b> to <a href="/x?a=1&amp;b=2" class="go">continue</a>.</p>', 'html');
    expect(plan.texts).toEqual(['Click here to continue.']);
    expect(plan.edges.map((edges) => [...edges].sort((a, b) => a - b))).toEqual([[6, 10, 14, 22]]);
    const target = 'Um fortzufahren, hier klicken.';
    const links = wordLinks(plan.texts[0]!, target, [
      ['Um', 'to'],
      ['fortzufahren', 'continue'],
      ['hier', 'here'],
      ['klicken', 'Click'],
    ]);
    expect(plan.render([target], [links])).toBe(
      '<p>Um <a href="/x?a=1&amp;b=2" class="go">fortzufahren</a>, <b>hier</b> klicken.</p>',
    );
  });

  it('links that would cross a parent or a sibling are clipped: each element once, properly nested', () => {
    const plan = planMarkup('<p>one <b>two <i>three</i></b> four <u>five</u></p>', 'html');
    const target = 'A B C D E';
    // "three" (inside <b>) aligns after "four"; "five" aligns onto the same word as "two".
    const links = wordLinks(plan.texts[0]!, target, [
      ['A', 'one'],
      ['B', 'two'],
      ['D', 'three'],
      ['C', 'four'],
    ]).concat([target.indexOf('B'), target.indexOf('B') + 1, plan.texts[0]!.indexOf('five'), plan.texts[0]!.length]);
    const out = plan.render([target], [links]);
    for (const tag of ['<b>', '</b>', '<i>', '</i>', '<u>', '</u>']) expect(out.split(tag).length).toBe(2);
    expect(out).toBe('<p>A <b>B C <i>D</i></b><u></u> E</p>');
    const p = parseFragment(out).childNodes[0] as unknown as { childNodes: { nodeName: string; childNodes?: [] }[] };
    expect(p.childNodes.filter((n) => n.nodeName !== '#text').map((n) => n.nodeName)).toEqual(['b', 'u']);
  });

  it('code, translate="no", a <br> and misnested tags end a run and stay whole and in place', () => {
    const plan = planMarkup(
      '<p>Run <code>npm <b>ci</b></code> now <b>please</b>.<br>Keep <span translate="no">Acme <i>Inc</i></span> ' +
        'as <b>is</b>.</p><p>Bad <b>nest <i>ing</b> here</i> too.</p>',
      'html',
    );
    expect(plan.texts).toEqual(['Run', 'now please.', 'Keep', 'as is.', 'Bad', 'nest', 'ing', 'here', 'too.']);
    expect(plan.edges.map((edges) => edges.length > 0)).toEqual([
      false,
      true,
      false,
      true,
      false,
      false,
      false,
      false,
      false,
    ]);
    const out = plan.render(plan.texts.map((t) => t.toUpperCase()));
    expect(out).toBe(
      '<p>RUN <code>npm <b>ci</b></code> NOW <b>PLEASE</b>.<br>KEEP <span translate="no">Acme <i>Inc</i></span> ' +
        'AS <b>IS</b>.</p><p>BAD <b>NEST <i>ING</b> HERE</i> TOO.</p>',
    );
  });

  it("a unit's sentences' links are joined where their pieces and translations stand", () => {
    const segments = { pieces: ['Hi <b>.', 'Go.'], separators: ['', '  ', ''] };
    const joined = 'Hallo. Los.';
    // Each sentence's links refer to its own translation, untrimmed, and its own piece.
    expect(
      joinLinks(
        segments,
        [' Hallo.', 'Los.'],
        [
          [1, 6, 0, 2],
          [0, 3, 0, 2],
        ],
        joined,
      ),
    ).toEqual([0, 5, 0, 2, 7, 10, 9, 11]);
  });
});

describe('edges: which sentences need aligning', () => {
  it('a sentence is cut by an edge strictly inside it, not by one at its ends or between sentences', () => {
    const segments = { pieces: ['One two.', 'Three.'], separators: [' ', ' ', ''] };
    expect(piecesCut(segments, [])).toEqual([false, false]);
    expect(piecesCut(segments, [1, 9, 10, 16])).toEqual([false, false]);
    expect(piecesCut(segments, [5])).toEqual([true, false]);
    expect(piecesCut(segments, [11])).toEqual([false, true]);
  });

  it('a whole link spans the trimmed translation and the whole source', () => {
    expect(wholeLink('Three.', ' Drei. ')).toEqual([1, 6, 0, 6]);
    expect(wholeLink('Three.', '  ')).toEqual([]);
  });
});
