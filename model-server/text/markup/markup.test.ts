import fc from 'fast-check';
import { parse, parseFragment, type DefaultTreeAdapterMap } from 'parse5';
import { SaxesParser } from 'saxes';
import { describe, expect, it } from 'vitest';
import { ServeError } from '../../../common/errors.js';
import { TRANSLATED_ATTRIBUTES } from './html-spans.js';
import { planMarkup, type MarkupFormat } from './markup.js';

type Node = DefaultTreeAdapterMap['node'];

/** Every unit translated to a marked, escaping-hostile string, so a unit written raw or in the wrong place shows. */
const translateAll = (source: string, format: MarkupFormat, ignoreTags?: string[]) => {
  const plan = planMarkup(source, format, { ignoreTags });
  return { texts: plan.texts, out: plan.render(plan.texts.map((t) => `«${t.toUpperCase()}» & <x> "q"`)) };
};

/** The element tree as a comparable value: names, attributes (translated ones by name only), comments. */
function htmlTree(source: string, fragment: boolean): unknown {
  const root = fragment ? parseFragment(source) : parse(source);
  const shape = (node: Node): unknown => {
    if (node.nodeName === '#text') return null;
    if (node.nodeName === '#comment') return { comment: (node as { data: string }).data };
    const element = node as DefaultTreeAdapterMap['element'];
    return {
      name: node.nodeName,
      attrs: element.attrs?.map((a) => (TRANSLATED_ATTRIBUTES.includes(a.name) ? a.name : `${a.name}=${a.value}`)),
      children: ('childNodes' in node ? node.childNodes : []).map(shape).filter((c) => c !== null),
    };
  };
  return shape(root);
}

describe('HTML', () => {
  it('translates text and allowed attributes in place, keeping tags, entities, comments and whitespace', () => {
    const source =
      '<p class="lead" title=\'A title\'>Hello &amp; welcome, <b>dear</b>\n  reader<br>Next line</p>\n' +
      '<!-- keep me --><img alt=cat src="x.png?a=1&amp;b=2"> tail';
    const { texts, out } = translateAll(source, 'html');
    // The run `Hello … <b>dear</b> reader` is one unit; without an alignment `<b>` takes its proportional place.
    expect(texts).toEqual(['A title', 'Hello & welcome, dear reader', 'Next line', 'cat', 'tail']);
    expect(out).toBe(
      '<p class="lead" title="«A TITLE» &amp; <x> &quot;q&quot;">«HELLO &amp; WELCOME, DEAR <b>READER»</b> &amp; ' +
        '&lt;x&gt; "q"<br>«NEXT LINE» &amp; &lt;x&gt; "q"</p>\n' +
        '<!-- keep me --><img alt="«CAT» &amp; <x> &quot;q&quot;" src="x.png?a=1&amp;b=2"> «TAIL» &amp; &lt;x&gt; "q"',
    );
  });

  it('never translates code, scripts, styles, translate="no", class notranslate or ignore_tags', () => {
    const source =
      '<!DOCTYPE html>\n<html><head><title>Page</title><style>p{}</style><script>var s = "<b>hi</b>";</script>' +
      '</head><body><pre>keep  this</pre><p>Run <code>npm ci</code> now.</p><p translate="no">Brand</p>' +
      '<div class="x notranslate">Name</div><kbd>Ctrl</kbd><custom-el>Own</custom-el><textarea>typed</textarea>' +
      '<p>2024 — 42%</p></body></html>\n';
    const { texts, out } = translateAll(source, 'html', ['custom-el']);
    expect(texts).toEqual(['Page', 'Run', 'now.']);
    for (const kept of ['<pre>keep  this</pre>', '<code>npm ci</code>', 'var s = "<b>hi</b>";', '>Brand<', '>Name<']) {
      expect(out).toContain(kept);
    }
    expect(out).toContain('<custom-el>Own</custom-el>');
    expect(out.startsWith('<!DOCTYPE html>\n<html><head><title>«PAGE»')).toBe(true);
    expect(out).toContain('<p>2024 — 42%</p>');
  });

  it('elements nested deeper than the call stack goes are walked all the same', () => {
    const depth = 50_000;
    const source = '<div>'.repeat(depth) + 'Hello world' + '</div>'.repeat(depth);
    const plan = planMarkup(source, 'html');
    expect(plan.texts).toEqual(['Hello world']);
    expect(plan.render(['Hallo Welt'])).toBe(source.replace('Hello world', 'Hallo Welt'));
  });

  it('text parse5 moves out of a table keeps the table: the cell between is not deleted', () => {
    const source = '<table><caption>Cap</caption>Stray<tr><td>Secret cell</td></tr>More</table>';
    const plan = planMarkup(source, 'html');
    // "Stray" and "More" become one text node before the table; its span covers the row, so it stays as it is.
    expect(plan.texts).toEqual(['Cap', 'Secret cell']);
    expect(plan.render(['Titel', 'Geheime Zelle'])).toBe(
      '<table><caption>Titel</caption>Stray<tr><td>Geheime Zelle</td></tr>More</table>',
    );
  });

  it('text around a tag parse5 ignores is translated on either side, the tag kept', () => {
    const plan = planMarkup('<p>Hello</span> world<body class="x">again</p>', 'html');
    expect(plan.texts).toEqual(['Hello', 'world', 'again']);
    expect(plan.render(['Hallo', 'Welt', 'wieder'])).toBe('<p>Hallo</span> Welt<body class="x">wieder</p>');
    // With an entity to decode, the runs cannot be told from the node's text: the node is kept as it is.
    expect(planMarkup('<p>Tom &amp;</span> Jerry</p>', 'html').texts).toEqual([]);
  });

  it('tells a document from a fragment after any run of comments, in linear time', () => {
    const comments = '<!---->'.repeat(50_000);
    const started = performance.now();
    // Parsed as a document, <html>'s title is the page's; in a fragment it is a stray tag's, and not in the tree.
    const page = '<html title="Page title"><body>Hello</body></html>';
    expect(planMarkup(`${comments}\n${page}`, 'html').texts).toEqual(['Page title', 'Hello']);
    expect(planMarkup(`${comments}<p>Hi</p>${page}`, 'html').texts).toEqual(['Hi', 'Hello']);
    // 32 comments took 34 s with the pattern it had.
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  it('a document with nothing to translate comes back byte for byte', () => {
    const source = '<div>\n  <br/>\n  <code>x</code> <!-- c -->\n</div>';
    expect(translateAll(source, 'html')).toEqual({ texts: [], out: source });
  });

  // Documents from a small grammar: inline and block elements, void elements, attributes (some translated,
  // quoted every way), comments, entities and text with characters that need escaping.
  const word = fc.constantFrom('Hello', 'world', 'a&b', '1 < 2', 'x > y', '"q"', "l'a", 'élan', '中文', 'nbsp\u00a0x');
  const text = fc.array(word, { minLength: 1, maxLength: 4 }).map((w) => w.join(' '));
  const escape = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  const attribute = fc
    .tuple(fc.constantFrom('class', 'id', 'title', 'alt', 'href', 'translate', 'data-x'), text, fc.nat(2))
    .map(([name, value, quote]) => {
      const v = value.replace(/&/g, '&amp;');
      if (quote === 0) return ` ${name}="${v.replace(/"/g, '&quot;')}"`;
      if (quote === 1) return ` ${name}='${v.replace(/'/g, '&#39;')}'`;
      return ` ${name}=${v.replace(/[\s"'<>=`]/g, '_')}`;
    });
  // Tables and stray end tags make parse5 move text (foster parenting) and join it with text from elsewhere.
  const { node } = fc.letrec((tie) => ({
    node: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      text.map(escape),
      fc.constantFrom('<br>', '<img src=a.png alt="An image">', '<!-- a comment -->', '&amp;', '&#x263A;', '\n  '),
      fc.constantFrom('</span>', '</x>', '<body class="b">'),
      fc
        .array(
          fc.oneof(
            text.map(escape),
            text.map((t) => `<caption>${escape(t)}</caption>`),
            tie('node').map((n) => `<tr><td>${n}</td></tr>`),
          ),
          { maxLength: 4 },
        )
        .map((children) => `<table>${children.join('')}</table>`),
      fc
        .tuple(
          fc.constantFrom('p', 'div', 'span', 'b', 'i', 'a', 'em', 'li', 'code', 'pre', 'h2', 'blockquote'),
          fc.array(attribute, { maxLength: 3 }),
          fc.array(tie('node'), { maxLength: 4 }),
        )
        .map(([name, attrs, children]) => `<${name}${[...new Set(attrs)].join('')}>${children.join('')}</${name}>`),
    ),
  }));

  it('property: the output parses to the same element tree as the input, for any document of the grammar', () => {
    fc.assert(
      fc.property(fc.array(node, { minLength: 1, maxLength: 5 }), (nodes) => {
        const source = nodes.join('');
        const { out } = translateAll(source, 'html');
        expect(htmlTree(out, true)).toEqual(htmlTree(source, true));
        // Translating each unit to itself gives back the same texts.
        const plan = planMarkup(source, 'html');
        expect(planMarkup(plan.render(plan.texts), 'html').texts).toEqual(plan.texts);
      }),
      { numRuns: 500 },
    );
  });
});

describe('XML', () => {
  const xmlTree = (source: string) => {
    const events: unknown[] = [];
    const parser = new SaxesParser();
    parser.on('opentag', (tag) => events.push(['open', tag.name, tag.attributes]));
    parser.on('closetag', (tag) => events.push(['close', tag.name]));
    parser.on('comment', (c) => events.push(['comment', c]));
    parser.on('cdata', (c) => events.push(['cdata', c]));
    parser.write(source).close();
    return events;
  };

  it('translates element text only: attributes, CDATA, comments, declarations and ignore_tags are kept', () => {
    const source =
      '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE doc>\n<doc lang="en" title="Keep">\n' +
      '  <s>Hello &amp; <b>bold</b> world</s><![CDATA[<raw> text]]><!-- note -->\n' +
      '  <skip>Do not</skip><s translate="no">Brand</s><e/>😀 after\n</doc>\n';
    // Outline detection off: no element is inline, so each text node is its own unit.
    const plan = planMarkup(source, 'xml', { ignoreTags: ['skip'], outlineDetection: false });
    const { texts } = plan;
    const out = plan.render(texts.map((t) => `«${t.toUpperCase()}» & <x> "q"`));
    expect(texts).toEqual(['Hello &', 'bold', 'world', '😀 after']);
    expect(xmlTree(out)).toEqual(xmlTree(source));
    expect(out).toContain('<s>«HELLO &amp;» &amp; &lt;x&gt; "q" <b>«BOLD» &amp; &lt;x&gt; "q"</b>');
    expect(out).toContain('<e/>«😀 AFTER» &amp; &lt;x&gt; "q"\n</doc>\n');
  });

  it('a comment right before text keeps its `>`: saxes reports a comment before reading it', () => {
    const plan = planMarkup('<a><!-- c -->Hello</a>', 'xml');
    expect(plan.render(['Hallo'])).toBe('<a><!-- c -->Hallo</a>');
  });

  it('malformed XML is a 400 naming where', () => {
    for (const [source, where] of [
      ['<doc><a>x</doc>', 'line 1, column 15'],
      ['<doc>\n<a>x', 'line 2'],
      ['<doc>&bogus;</doc>', 'line 1'],
    ] as const) {
      let error: unknown;
      try {
        planMarkup(source, 'xml');
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(ServeError);
      expect((error as ServeError).code).toBe('BAD_REQUEST');
      expect((error as ServeError).message).toContain(where);
    }
  });

  const fragmentOf = (source: string, ignoreTags: string[] = []) => {
    const plan = planMarkup(source, 'xml', { ignoreTags, fragment: true, outlineDetection: false });
    return { texts: plan.texts, out: plan.render(plan.texts.map((t) => `[${t.toUpperCase()}]`)) };
  };

  it("fragment: text outside a root and several roots, as DeepL's own tag_handling=xml examples send them", () => {
    const settings = fragmentOf('Please open the page <x>Settings</x> to configure your system.', ['x']);
    expect(settings.texts).toEqual(['Please open the page', 'to configure your system.']);
    expect(settings.out).toBe('[PLEASE OPEN THE PAGE] <x>Settings</x> [TO CONFIGURE YOUR SYSTEM.]');
    const roots = fragmentOf(
      '<p>This is a <b>short</b> <i>sentence</i>.</p> <ignore>Kept as it is.</ignore> This is another sentence.',
      ['ignore'],
    );
    expect(roots.texts).toEqual(['This is a', 'short', 'sentence', 'This is another sentence.']);
    expect(roots.out).toBe(
      '<p>[THIS IS A] <b>[SHORT]</b> <i>[SENTENCE]</i>.</p> <ignore>Kept as it is.</ignore> [THIS IS ANOTHER SENTENCE.]',
    );
    expect(fragmentOf('Press <b>Continue</b> to advance.').out).toBe('[PRESS] <b>[CONTINUE]</b> [TO ADVANCE.]');
    // Without the option the same text is still a 400, as the native API answers it.
    expect(() => planMarkup('Press <b>Continue</b> to advance.', 'xml')).toThrow(/not well-formed/);
  });

  it('fragment: a whole document (declaration, doctype) parses as one; a bad fragment is a 400 saying what is wrong', () => {
    const document = '<?xml version="1.0"?>\n<!DOCTYPE doc>\n<doc>Hello <b>there</b></doc>';
    expect(fragmentOf(document).out).toBe('<?xml version="1.0"?>\n<!DOCTYPE doc>\n<doc>[HELLO] <b>[THERE]</b></doc>');
    expect(fragmentOf('  <!DOCTYPE html>\n<html><body><p>Hi</p></body></html>').texts).toEqual(['Hi']);
    expect(() => fragmentOf('Text <b>unclosed')).toThrow(
      'The XML is not well-formed at line 1, column 16: unclosed tag: b',
    );
    expect(() => fragmentOf('<?xml version="1.0"?><a>x</b>')).toThrow(/line 1, column 29: unexpected close tag/);
  });
});

describe('XML runs: sentences whole across inline elements', () => {
  /** Links of a copy: each word and each mark of the text to itself, as the copy model's alignment gives them. */
  const copyLinks = (text: string) =>
    [...text.matchAll(/[\p{L}\p{N}]+|[^\s\p{L}\p{N}]/gu)].flatMap((m) => [
      m.index,
      m.index + m[0].length,
      m.index,
      m.index + m[0].length,
    ]);
  /** The plan's units, and the document rendered from a copy of each with its links. */
  const copied = (source: string, options: Parameters<typeof planMarkup>[2]) => {
    const plan = planMarkup(source, 'xml', options);
    return {
      texts: plan.texts,
      aligned: plan.edges.map((edges) => edges.length > 0),
      out: plan.render(plan.texts, plan.texts.map(copyLinks)),
    };
  };

  it('non_splitting_tags: a listed element is part of its sentence and lands back on its words', () => {
    const source = '<doc><par>One <b>two</b> three.</par><par>Four <i>five</i></par></doc>';
    const listed = copied(source, { nonSplittingTags: ['b'], outlineDetection: false });
    expect(listed.texts).toEqual(['One two three.', 'Four', 'five']);
    expect(listed.aligned).toEqual([true, false, false]);
    expect(listed.out).toBe(source);
  });

  it('outline detection: an unlisted element in mixed content holding text is inline; a list of elements is not', () => {
    const source =
      '<doc>\n  <par>Press <b>Continue</b> to <link ref="a&amp;b">go <i>on</i></link>, <b><i>now</i></b>.</par>\n' +
      '  <par>See <list>\n    <item>one</item>\n    <item>two</item>\n  </list> here.</par>\n</doc>';
    const inferred = copied(source, {});
    expect(inferred.texts).toEqual(['Press Continue to go on, now.', 'See', 'one', 'two', 'here.']);
    expect(inferred.aligned).toEqual([true, false, false, false, false]);
    expect(inferred.out).toBe(source);
    // Listed as splitting, an element that would be inferred inline is a block.
    expect(copied(source, { splittingTags: ['link'] }).texts).toEqual([
      'Press Continue to',
      'go on',
      ', now.',
      'See',
      'one',
      'two',
      'here.',
    ]);
  });

  it('outline detection off: only the non-splitting tags are inline', () => {
    const source = '<p>Hi <b>there</b>, <i>you</i>.</p>';
    expect(copied(source, { outlineDetection: false }).texts).toEqual(
      ['Hi', 'there', ', you', '.'].slice(0, 2).concat(['you']),
    );
    const listed = copied(source, { outlineDetection: false, nonSplittingTags: ['i'] });
    expect(listed.texts).toEqual(['Hi', 'there', ', you.']);
    expect(listed.out).toBe(source);
  });

  it('ignore_tags, translate="no" and comments end a run, and stay whole and in place', () => {
    const source =
      '<p>Run <cmd>npm ci</cmd> now, <b>then</b> stop.<!-- c --> <b>Keep</b> <s translate="no">Brand</s></p>';
    const run = copied(source, { ignoreTags: ['cmd'] });
    expect(run.texts).toEqual(['Run', 'now, then stop.', 'Keep']);
    expect(run.aligned).toEqual([false, true, true]);
    expect(run.out).toBe(source);
    // An inline element holding an ignored one is not inline: the text around it is translated apart.
    expect(copied('<p>A <b>bold <cmd>x</cmd></b> word</p>', { ignoreTags: ['cmd'] }).texts).toEqual([
      'A',
      'bold',
      'word',
    ]);
  });

  it('fragments and prefixed names: DeepL-style text with `<x:b>` elements, matched by their qualified names', () => {
    const source = 'Open <x:b xmlns:x="urn:x">the <x:i>front</x:i> door</x:b> now. <y/>Then close it.';
    const inferred = copied(source, { fragment: true });
    expect(inferred.texts).toEqual(['Open the front door now. Then close it.']);
    expect(inferred.out).toBe(source);
    const listed = copied(source, { fragment: true, outlineDetection: false, nonSplittingTags: ['x:b', 'x:i', 'y'] });
    expect(listed.texts).toEqual(['Open the front door now. Then close it.']);
    expect(listed.out).toBe(source);
    // The local name alone does not match a prefixed element.
    expect(
      copied(source, { fragment: true, outlineDetection: false, nonSplittingTags: ['b', 'i', 'y'] }).texts,
    ).toEqual(['Open', 'the', 'front', 'door', 'now. Then close it.']);
  });

  // XML documents from a small grammar: elements with and without text, self-closing ones, attributes with
  // entities, comments, CDATA; planned with any of the options.
  const word = fc.constantFrom('Hello', 'world', 'a&amp;b', '1 &lt; 2', 'x > y', '"q"', 'élan', '中文', '\n  ');
  const name = fc.constantFrom('b', 'i', 'p', 'x:b', 'item', 'skip');
  const { node } = fc.letrec((tie) => ({
    node: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      word,
      fc.constantFrom('<!-- c -->', '<![CDATA[<raw>]]>', '<br/>', '<i translate="no">Brand</i>'),
      fc
        .tuple(name, fc.constantFrom('', ' a="1 &amp; 2"'), fc.array(tie('node'), { maxLength: 4 }))
        .map(([tag, attrs, children]) => `<${tag}${attrs}>${children.join('')}</${tag}>`),
    ),
  }));
  const options = fc.record({
    ignoreTags: fc.constantFrom([], ['skip']),
    nonSplittingTags: fc.subarray(['b', 'x:b', 'p']),
    splittingTags: fc.subarray(['i', 'item']),
    outlineDetection: fc.boolean(),
  });
  const xmlTree = (source: string) => {
    const events: unknown[] = [];
    const parser = new SaxesParser({ fragment: true });
    parser.on('opentag', (tag) => events.push(['open', tag.name, tag.attributes]));
    parser.on('closetag', (tag) => events.push(['close', tag.name]));
    parser.on('comment', (c) => events.push(['comment', c]));
    parser.on('cdata', (c) => events.push(['cdata', c]));
    parser.write(source).close();
    return events;
  };

  const textOf = (source: string) => {
    let text = '';
    const parser = new SaxesParser({ fragment: true });
    parser.on('text', (t) => (text += t.replace(/\s+/g, '')));
    parser.write(source).close();
    return text;
  };

  it('property: the output parses to the same element tree; a copy with its links gives back every character', () => {
    fc.assert(
      fc.property(fc.array(node, { minLength: 1, maxLength: 5 }), options, (nodes, chosen) => {
        const source = nodes.join('');
        const plan = planMarkup(source, 'xml', { ...chosen, fragment: true });
        const out = plan.render(plan.texts.map((t) => `«${t.toUpperCase()}» & <x> "q"`));
        expect(xmlTree(out)).toEqual(xmlTree(source));
        const copy = plan.render(plan.texts, plan.texts.map(copyLinks));
        expect(xmlTree(copy)).toEqual(xmlTree(source));
        // Copied, every character comes back once and in order (whitespace inside a run is collapsed).
        expect(textOf(copy)).toBe(textOf(source));
      }),
      { numRuns: 500 },
    );
  });
});
