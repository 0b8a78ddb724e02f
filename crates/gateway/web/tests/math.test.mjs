// Math in Iris Web, at phone and desktop size, against the real gateway and its demo agent (which
// echoes the prompt): `$…$`, `\(…\)`, `$$…$$` and `\[…\]` are drawn as MathML by KaTeX, which
// is fetched only once a message has a formula; money ("$5 and $10"), code and `\$` stay text; a
// formula KaTeX cannot read shows its source; the formulas survive a reload and look the same on
// a second device; and nothing breaks the page's Content-Security-Policy (a violation is a
// console error, which fails the test).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { DESKTOP, PHONE, browserSuite, openSignedIn, pageErrors, send, shot, waitOnline } from './harness.mjs';

const suite = browserSuite(before, after);
const SIZES = [['phone', PHONE], ['desktop', DESKTOP]];

const MATH = [
  'Formulas: $e^{i\\pi} + 1 = 0$ and \\(a^2+b^2=c^2\\), priced $5 and $10, `$x$` in code, broken $\\frac{1$ here.',
  '$$',
  '\\int_0^1 x\\,dx = \\frac12',
  '$$',
].join('\n');

/** The agent's answer holding `text`, once complete. */
const answer = (page, text) => page.locator('.msg.role-assistant:not(.streaming)', { hasText: text });

/** Requests for KaTeX a page made. */
function watchKatex(page) {
  const seen = [];
  page.on('request', (r) => { if (/katex/i.test(r.url())) seen.push(r.url()); });
  return seen;
}

/** Checks the answer shows the three formulas as MathML, and the rest as the text it is. */
async function assertDrawn(page, viewport) {
  const msg = answer(page, 'Echo: Formulas');
  await msg.waitFor();
  await msg.locator('.math-done').nth(2).waitFor();
  const got = await msg.locator('.body').evaluate((body) => ({
    maths: body.querySelectorAll('math').length,
    blocks: body.querySelectorAll('math[display="block"]').length,
    text: body.innerText,
    code: [...body.querySelectorAll('code')].map((c) => c.textContent),
    broken: [...body.querySelectorAll('.math-error')].map((e) => e.textContent),
    sizes: [...body.querySelectorAll('math')].map((m) => m.getBoundingClientRect().width),
    scroll: document.documentElement.scrollWidth,
  }));
  assert.equal(got.maths, 3, 'two inline formulas and a display');
  assert.equal(got.blocks, 1);
  assert.ok(got.sizes.every((w) => w > 10), `laid out: ${got.sizes}`);
  for (const source of ['$e^', '\\(', '\\pi', '$$', '\\int', '\\frac12']) {
    assert.ok(!got.text.includes(source), `"${source}" is not shown: ${got.text}`);
  }
  assert.ok(got.text.includes('priced $5 and $10,'), `money stays text: ${got.text}`);
  assert.deepEqual(got.code, ['$x$'], 'code is never math');
  assert.deepEqual(got.broken, ['$\\frac{1$'], 'a broken formula shows its source');
  assert.ok(got.scroll <= viewport.width, `nothing wider than the screen (${got.scroll}px)`);
}

describe('math', { timeout: 300000 }, () => {
  for (const [size, viewport] of SIZES) {
    test(`formulas are drawn as MathML, loaded only when needed, after a reload and on another device (${size})`, { timeout: 120000 }, async () => {
      const gw = await suite.gateway();
      const { page } = await suite.device(viewport);
      const requested = watchKatex(page);
      await openSignedIn(page, gw.url);

      // No formula anywhere: KaTeX is never fetched.
      await send(page, 'Plain words, priced $5 and $10.');
      await answer(page, 'Echo: Plain words').waitFor();
      assert.equal(await page.locator('.msg .math').count(), 0, 'money is not math');
      assert.deepEqual(requested, [], 'a page without formulas does not load KaTeX');

      await send(page, MATH);
      await assertDrawn(page, viewport);
      assert.equal(requested.length, 1, `KaTeX fetched once: ${requested}`);
      await shot(page, `math-${size}`);

      // From history after a reload, and on a second device.
      await page.reload();
      await waitOnline(page);
      await assertDrawn(page, viewport);
      const other = await suite.device(viewport);
      await openSignedIn(other.page, gw.url);
      await assertDrawn(other.page, viewport);
      assert.deepEqual(pageErrors(page), []);
      assert.deepEqual(pageErrors(other.page), []);
    });
  }

  test('the renderer: delimiters, escapes, display blocks and KaTeX commands that could reach out', { timeout: 60000 }, async () => {
    const gw = await suite.gateway();
    const { page } = await suite.device(DESKTOP);
    await openSignedIn(page, gw.url);
    const cases = await page.evaluate(async () => {
      const { markdown } = await import('/assets/markdown.js');
      const inputs = {
        money: 'From $5 to $10, $3.50 or $5/$10, $ 1 $.',
        escaped: 'A \\$x\\$ is text.',
        spaced: 'Not math: $ x$ and $x $ end.',
        inline: 'Inline $x_1$ and $$y^2$$ and \\(z\\).',
        block: 'Before\n\n\\[\n\\sum_{k=1}^n k\n\\]\n\nafter',
        fenced: '```\n$$\nx\n$$\n```',
        reach: '$\\href{javascript:window.pwned=1}{x}$ $\\url{https://example.com}$ $\\htmlStyle{color:red}{y}$ $\\includegraphics{x.png}$',
      };
      const divs = {};
      for (const [k, v] of Object.entries(inputs)) {
        divs[k] = document.createElement('div');
        divs[k].append(markdown(v));
        document.body.append(divs[k]);
      }
      await import('/assets/vendor/katex/katex.mjs');
      // Drawn once KaTeX's module has resolved, a task later.
      await new Promise((r) => setTimeout(r, 0));
      const out = {};
      for (const [k, d] of Object.entries(divs)) {
        out[k] = {
          maths: d.querySelectorAll('math').length,
          text: d.innerText.trim(),
          attrs: [...new Set([...d.querySelectorAll('*')].flatMap((e) => [...e.attributes].map((a) => a.name)))].sort(),
        };
      }
      return { out, pwned: window.pwned };
    });
    const { out } = cases;
    assert.deepEqual([out.money.maths, out.money.text], [0, 'From $5 to $10, $3.50 or $5/$10, $ 1 $.']);
    assert.deepEqual([out.escaped.maths, out.escaped.text], [0, 'A $x$ is text.']);
    assert.deepEqual([out.spaced.maths, out.spaced.text], [0, 'Not math: $ x$ and $x $ end.']);
    assert.equal(out.inline.maths, 3);
    assert.equal(out.block.maths, 1);
    assert.match(out.block.text, /^Before\n[\s\S]*\nafter$/);
    assert.deepEqual([out.fenced.maths, out.fenced.text.replace(/\s+/g, ' ')], [0, 'text Copy $$ x $$']);
    assert.equal(cases.pwned, undefined);
    for (const a of out.reach.attrs) {
      assert.ok(!['href', 'src', 'style'].includes(a) && !a.startsWith('on'), `no ${a} attribute from a formula`);
    }
    assert.deepEqual(pageErrors(page), []);
  });
});
