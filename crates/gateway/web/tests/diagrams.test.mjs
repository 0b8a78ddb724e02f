// Mermaid diagrams in Iris Web, at phone and desktop size, against the real gateway and its demo
// agent (which echoes the prompt): a ```mermaid block is shown as an image of the diagram with its
// source behind "Show source"; Mermaid is fetched only once a message has one; an injection
// attempt in a diagram runs nothing; a diagram Mermaid cannot read stays a code block; and the
// diagrams survive a reload and look the same on a second device; on a dark page they are drawn
// in Mermaid's dark colours, and drawn again when the theme changes. The page's
// Content-Security-Policy is never broken (a violation is a console error).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { DESKTOP, PHONE, browserSuite, openSignedIn, pageErrors, send, shot, waitOnline } from './harness.mjs';

const suite = browserSuite(before, after);
const SIZES = [['phone', PHONE], ['desktop', DESKTOP]];

const FLOW = ['graph TD', '  A[Start] --> B{Ready?}', '  B -->|Yes| C[Ship]', '  B -->|No| D[Wait]'].join('\n');
const HOSTILE = [
  '%%{init: {"securityLevel": "loose", "startOnLoad": true}}%%',
  'graph LR',
  '  X["<img src=x onerror=window.pwned=1>"] --> Y["<a href=javascript:window.pwned=2>go</a>"]',
  '  Y --> Z["<script>window.pwned=3</script>"]',
  '  click X call alert(4)',
  '  click Y "javascript:window.pwned=5"',
  '  click Z href "javascript:alert(6)"',
].join('\n');
const BROKEN = 'graph TD\n  A -->';

const fence = (body) => `\`\`\`mermaid\n${body}\n\`\`\``;
const MESSAGE = `Diagrams:\n${fence(FLOW)}\nBroken:\n${fence(BROKEN)}\nHostile:\n${fence(HOSTILE)}\nend`;

/** The agent's answer holding `text`, once complete. */
const answer = (page, text) => page.locator('.msg.role-assistant:not(.streaming)', { hasText: text });

/** Requests for Mermaid or its frame a page made. */
function watchMermaid(page) {
  const seen = [];
  page.on('request', (r) => { if (/vendor\/mermaid|diagram\.html|diagram-frame/.test(r.url())) seen.push(r.url()); });
  return seen;
}

/**
 * The page's console errors, but the diagram frame's refusal of the hostile label's `onerror`
 * (Mermaid decodes a label's entities through a detached element): its policy, named by the
 * hash of the frame's import map, blocked it.
 */
async function errors(page, gw) {
  const csp = (await fetch(new URL('assets/diagram.html', gw.url))).headers.get('content-security-policy');
  const script = /script-src [^;]+/.exec(csp)[0];
  return pageErrors(page).filter((e) => !e.startsWith(`Executing inline event handler violates the following Content Security Policy directive '${script}'.`));
}

/** Checks the answer shows two diagrams as images and the broken one as its code. */
async function assertDrawn(page) {
  const msg = answer(page, 'Echo: Diagrams');
  await msg.waitFor();
  await msg.locator('img.diagram-image').nth(1).waitFor();
  await page.waitForFunction(() => [...document.querySelectorAll('.msg.role-assistant img.diagram-image')].every((i) => i.complete));
  const got = await msg.locator('.body').evaluate((body) => ({
    images: [...body.querySelectorAll('img.diagram-image')].map((i) => ({
      alt: i.alt, blob: i.src.startsWith('blob:'), width: i.naturalWidth, shown: i.getBoundingClientRect().width,
    })),
    live: body.querySelectorAll('svg, script, iframe, a[href^="javascript"], [onerror]').length,
    sources: [...body.querySelectorAll('.diagram details.diagram-source code')].map((c) => c.textContent.trim()),
    closed: [...body.querySelectorAll('.diagram details')].every((d) => !d.open),
    codeBlocks: [...body.querySelectorAll(':scope > .code-block code.language-mermaid')].map((c) => c.textContent.trim()),
    scroll: document.documentElement.scrollWidth,
  }));
  assert.equal(got.images.length, 2, JSON.stringify(got));
  for (const img of got.images) {
    assert.ok(img.blob && img.width > 50 && img.shown > 50, `an image of a drawn diagram: ${JSON.stringify(img)}`);
    assert.equal(img.alt, 'Diagram (flowchart)');
  }
  assert.equal(got.live, 0, 'no live SVG, script, frame or handler in the message');
  assert.deepEqual(got.sources, [FLOW, HOSTILE], 'each source is kept behind "Show source"');
  assert.ok(got.closed);
  assert.deepEqual(got.codeBlocks, [BROKEN], 'a broken diagram stays a code block');
  assert.ok(got.scroll <= page.viewportSize().width, `nothing wider than the screen (${got.scroll}px)`);
}

describe('diagrams', { timeout: 300000 }, () => {
  for (const [size, viewport] of SIZES) {
    test(`mermaid blocks become images, safely, loaded only when needed, after a reload and on another device (${size})`, { timeout: 120000 }, async () => {
      const gw = await suite.gateway();
      const { page } = await suite.device(viewport);
      const requested = watchMermaid(page);
      const dialogs = [];
      page.on('dialog', (d) => { dialogs.push(d.message()); d.dismiss().catch(() => {}); });
      await openSignedIn(page, gw.url);

      // Code, but no diagram: Mermaid is never fetched.
      await send(page, 'Plain:\n```js\nconst a = 1;\n```');
      await answer(page, 'Echo: Plain').locator('.code-block').waitFor();
      assert.deepEqual(requested, [], 'a page without diagrams does not load Mermaid');

      await send(page, MESSAGE);
      await assertDrawn(page);
      assert.ok(requested.some((u) => /\/mermaid\.esm\.min\.[0-9a-f]{16}\.mjs$/.test(u)), `Mermaid was loaded, by its hashed name: ${requested}`);

      // "Show source" opens the block, with Copy.
      const msg = answer(page, 'Echo: Diagrams');
      await msg.getByText('Show source').first().click();
      await msg.getByRole('button', { name: 'Copy mermaid code' }).first().waitFor();
      await shot(page, `diagrams-${size}`);

      // Nothing the hostile diagram carried ran, in the page or in the frame that drew it.
      assert.equal(await page.evaluate(() => window.pwned), undefined);
      for (const frame of page.frames()) assert.equal(await frame.evaluate(() => window.pwned), undefined);
      assert.deepEqual(dialogs, []);

      // From history after a reload, and on a second device.
      await page.reload();
      await waitOnline(page);
      await assertDrawn(page);
      const other = await suite.device(viewport);
      await openSignedIn(other.page, gw.url);
      await assertDrawn(other.page);
      assert.equal(await page.evaluate(() => window.pwned), undefined);
      assert.deepEqual(dialogs, []);
      assert.deepEqual(await errors(page, gw), []);
      assert.deepEqual(await errors(other.page, gw), []);
    });
  }

  test('only a closed mermaid fence is drawn: a streaming answer\'s unfinished block stays code', { timeout: 60000 }, async () => {
    const gw = await suite.gateway();
    const { page } = await suite.device(DESKTOP);
    await openSignedIn(page, gw.url);
    const marked = await page.evaluate(async (flow) => {
      const { markdown } = await import('/assets/markdown.js');
      const count = (text) => markdown(text).querySelectorAll('code[data-diagram]').length;
      return {
        open: count(`Soon:\n\`\`\`mermaid\n${flow}`),
        openAtFence: count(`\`\`\`mermaid\n${flow}\n\`\``),
        closed: count(`\`\`\`mermaid\n${flow}\n\`\`\``),
        tildes: count(`~~~mermaid\n${flow}\n~~~`),
        longer: count(`\`\`\`\`mermaid\n${flow}\n\`\`\`\n\`\`\`\``),
        other: count(`\`\`\`js\n${flow}\n\`\`\``),
      };
    }, FLOW);
    assert.deepEqual(marked, { open: 0, openAtFence: 0, closed: 1, tildes: 1, longer: 1, other: 0 });
  });

  test('a diagram takes the page\'s theme, and is drawn again when it changes', { timeout: 90000 }, async () => {
    const gw = await suite.gateway();
    const { page } = await suite.device(DESKTOP);
    await page.emulateMedia({ colorScheme: 'light' });
    await openSignedIn(page, gw.url);
    await send(page, `Themed:\n${fence(FLOW)}`);
    const img = answer(page, 'Echo: Themed').locator('img.diagram-image');
    /** The image's theme once drawn, and how light its visible pixels are (0 to 255). */
    const drawnAs = async (wanted) => {
      await page.waitForFunction((t) => {
        const i = document.querySelector('.msg.role-assistant img.diagram-image');
        return i && i.dataset.theme === t && i.complete && i.naturalWidth > 0;
      }, wanted);
      return img.evaluate(async (i) => {
        await i.decode();
        const canvas = document.createElement('canvas');
        canvas.width = i.naturalWidth;
        canvas.height = i.naturalHeight;
        const ctx = canvas.getContext('2d');
        ctx.drawImage(i, 0, 0);
        const px = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
        let sum = 0;
        let n = 0;
        for (let k = 0; k < px.length; k += 4) {
          if (px[k + 3] < 200) continue;
          sum += 0.2126 * px[k] + 0.7152 * px[k + 1] + 0.0722 * px[k + 2];
          n += 1;
        }
        return n ? sum / n : -1;
      });
    };
    const light = await drawnAs('default');
    await page.evaluate(() => {
      localStorage.setItem('iris.theme', 'dark');
      document.dispatchEvent(new Event('iris-theme'));
    });
    const dark = await drawnAs('dark');
    assert.ok(light > 150 && dark < 110, `light ${light.toFixed(0)}, dark ${dark.toFixed(0)}`);
    await shot(page, 'diagram-dark-desktop');
    // A reload on a dark page draws it dark at once.
    await page.reload();
    await waitOnline(page);
    assert.ok(await drawnAs('dark') < 110);
    assert.deepEqual(await errors(page, gw), []);
  });
});
