// Browser tests of the pieces that come from vendored libraries (../assets/vendor/): Markdown
// (markdown-it + DOMPurify), code blocks (highlight.js), upload hashing (@noble/hashes) and icons
// (Lucide), in Debian's headless Chromium against the real gateway and its demo agent.

import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { DESKTOP, Gateway, PHONE, launchBrowser, newDevice, openSignedIn, send, shot } from './harness.mjs';

let browser;
let gw;
const contexts = [];

before(async () => {
  browser = await launchBrowser();
  gw = await new Gateway().start();
});

after(async () => {
  for (const c of contexts) await c.close().catch(() => {});
  if (gw) await gw.dispose();
  if (browser) await browser.close();
});

async function signedIn(viewport = DESKTOP) {
  const d = await newDevice(browser, viewport);
  contexts.push(d.context);
  await openSignedIn(d.page, gw.url);
  return d;
}

const assistant = (page, text) => page.locator('.msg.role-assistant:not(.streaming)', { hasText: text });

/** Renders `text` with the page's own Markdown module and returns the resulting HTML. */
function render(page, text) {
  return page.evaluate(async (t) => {
    const { markdown } = await import('/assets/markdown.js');
    const div = document.createElement('div');
    div.append(markdown(t));
    return div.innerHTML;
  }, text);
}

describe('vendored libraries', { timeout: 240000 }, () => {
  test('markdown: XSS attempts stay inert, only http(s)/mailto links, images become links', { timeout: 60000 }, async () => {
    const { page } = await signedIn(DESKTOP);
    const attempts = [
      '<img src=x onerror="window.pwned=1">',
      '<script>window.pwned=2</script>',
      '[a](javascript:window.pwned=3)',
      '[b](JAVASCRIPT:window.pwned=4)',
      '[c](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)',
      '[d](vbscript:msgbox)',
      '<a href="javascript:window.pwned=5">e</a>',
      '<svg onload="window.pwned=6"></svg>',
      '<iframe src="https://example.com"></iframe>',
      '[f](https://example.com/"onmouseover="window.pwned=7)',
      '![g](https://tracker.example.com/pixel.png)',
      '![h](javascript:window.pwned=8)',
      '<details open ontoggle="window.pwned=9">x</details>',
      '`<b>in code</b>`',
    ];
    const html = await render(page, attempts.join('\n\n'));
    const { tags, attrs, hrefs } = await page.evaluate((h) => {
      const div = document.createElement('div');
      div.innerHTML = h;
      const all = [...div.querySelectorAll('*')];
      return {
        tags: [...new Set(all.map((e) => e.localName))].sort(),
        attrs: [...new Set(all.flatMap((e) => [...e.attributes].map((a) => a.name)))].sort(),
        hrefs: all.filter((e) => e.hasAttribute('href')).map((e) => e.getAttribute('href')),
      };
    }, html);
    assert.deepEqual(tags, ['a', 'code', 'p'], 'no element from the agent\'s HTML');
    assert.deepEqual(attrs, ['class', 'href', 'rel', 'target'], 'no event handler or style attribute');
    assert.ok(hrefs.every((h) => /^https:\/\//.test(h)), `only http(s) links: ${hrefs}`);
    assert.match(html, /&lt;script&gt;window\.pwned=2&lt;\/script&gt;/, 'raw HTML is shown as text');
    assert.match(html, /<code>&lt;b&gt;in code&lt;\/b&gt;<\/code>/);
    assert.match(html, /<a class="md-image" href="https:\/\/tracker\.example\.com\/pixel\.png" target="_blank" rel="noopener noreferrer nofollow">g<\/a>/,
      'an image is a link to it, never fetched');

    const safe = await render(page, '[site](https://example.com/a?b=1) [mail](mailto:me@example.com) see https://iris.example.com/x.');
    const links = await page.evaluate((h) => {
      const div = document.createElement('div');
      div.innerHTML = h;
      return [...div.querySelectorAll('a')].map((a) => [a.textContent, a.getAttribute('href'), a.rel]);
    }, safe);
    assert.deepEqual(links, [
      ['site', 'https://example.com/a?b=1', 'noopener noreferrer nofollow'],
      ['mail', 'mailto:me@example.com', 'noopener noreferrer nofollow'],
      ['https://iris.example.com/x', 'https://iris.example.com/x', 'noopener noreferrer nofollow'],
    ]);

    // The same through the agent: the echo of an attack reaches the transcript as text.
    await send(page, attempts.slice(0, 3).join(' '));
    const answer = assistant(page, 'Echo: <img src=x');
    await answer.waitFor();
    assert.equal(await answer.locator('img, script').count(), 0);
    assert.equal(await answer.locator('.body a').count(), 0);
    assert.equal(await page.evaluate(() => window.pwned), undefined);
    assert.deepEqual(page.errors, []);
  });

  test('markdown: blocks and inline formatting, and a 64 KB message of unmatched emphasis renders correctly', { timeout: 60000 }, async () => {
    const { page } = await signedIn(PHONE);
    const html = await render(page, '# Title\n\n- a\n- [x] done\n- [ ] todo\n\n1. one\n2. two\n\n> quoted\n\n| a | b |\n|---|--:|\n| 1 | 2 |\n\n**bold** *it* ~~gone~~ snake_case_name\nline two');
    for (const want of ['<h3 class="md-h">Title</h3>', '<li class="task">☑ done</li>', '<li class="task">☐ todo</li>', '<ol>', '<blockquote>',
      '<div class="md-table" tabindex="0" role="region" aria-label="Table"><table>', '<td class="align-right">2</td>', '<strong>bold</strong>', '<em>it</em>', '<s>gone</s>', 'snake_case_name<br>']) {
      assert.ok(html.includes(want), `${want} in ${html}`);
    }

    const { ms, length, text } = await page.evaluate(async () => {
      const { markdown } = await import('/assets/markdown.js');
      const input = ' __a'.repeat(16000);
      const t0 = performance.now();
      const frag = markdown(input);
      const took = performance.now() - t0;
      return { ms: took, length: input.length, text: frag.textContent };
    });
    assert.equal(length, 64000);
    assert.equal(text.trim(), ' __a'.repeat(16000).trim(), 'unmatched delimiters stay as text');
    assert.ok(ms < 1000, `a smoke bound only; the figure is in BENCHMARKS.md (took ${ms.toFixed(1)} ms)`);
  });

  test('a runaway answer ends at the gateway\'s bound and is shown as plain text; a long text never goes to the parser', { timeout: 90000 }, async () => {
    const { page } = await signedIn(DESKTOP);
    // The demo agent would write 8 MiB; the gateway keeps 512 KiB and stops the turn.
    await send(page, 'flood');
    const answer = assistant(page, 'flood flood');
    await answer.waitFor({ timeout: 60000 });
    assert.equal(await answer.locator('.md-note').textContent(), 'Shown as plain text: too long to format.');
    const kept = await answer.locator('.md-plain').evaluate((el) => el.textContent.length);
    assert.ok(kept > 448 * 1024 && kept <= 512 * 1024, `${kept} characters kept`);
    await answer.locator('.ended', { hasText: 'Agent failed' }).waitFor();
    await page.locator('.msg.role-system', { hasText: 'more than one answer may hold' }).waitFor();
    await send(page, 'still answering');
    await assistant(page, 'Echo: still answering').waitFor();

    // Thousands of unclosed `[` (slow for a Markdown parser) beyond the limit stay as they are.
    const { limit, text } = await page.evaluate(async () => {
      const { markdown, FORMAT_MAX } = await import('/assets/markdown.js');
      const frag = markdown('['.repeat(FORMAT_MAX + 1));
      return { limit: FORMAT_MAX, text: frag.querySelector('.md-plain').textContent };
    });
    assert.equal(text, '['.repeat(limit + 1));
    assert.deepEqual(page.errors, []);
  });

  test('a code block is highlighted, labelled, and copied with "Copied" feedback', { timeout: 60000 }, async () => {
    const { page, context } = await signedIn(DESKTOP);
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: gw.url });
    const highlighter = () => page.evaluate(() => performance.getEntriesByType('resource')
      .map((e) => new URL(e.name).pathname).filter((p) => p.includes('/vendor/highlight/'))
      .map((p) => p.replace(/^.*\/vendor\/highlight\//, '').replace(/\.[0-9a-f]{16}\.js$/, '.js')).sort());
    assert.deepEqual(await highlighter(), [], 'highlight.js is not loaded before a code block needs it');
    await send(page, 'here\n```rust\nfn main() { let x = 42; }\n```');
    const answer = assistant(page, 'fn main()');
    await answer.waitFor();
    const block = answer.locator('.code-block');
    assert.equal(await block.locator('.code-lang').textContent(), 'rust');
    await block.locator('.hljs-keyword', { hasText: 'fn' }).first().waitFor();
    assert.deepEqual(await highlighter(), ['core.min.js', 'languages/rust.min.js'], 'only the core and the language needed');
    assert.ok(await block.locator('.hljs-number', { hasText: '42' }).count() > 0);
    const copy = block.getByRole('button', { name: 'Copy rust code' });
    await copy.click();
    await block.locator('.code-copy', { hasText: 'Copied' }).waitFor();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), 'fn main() { let x = 42; }\n');
    await shot(page, 'code-block-desktop');
    await block.locator('.code-copy', { hasText: /^Copy$/ }).waitFor({ timeout: 5000 });
    assert.deepEqual(page.errors, []);
  });

  test('an upload is hashed in the page and the gateway accepts the hash', { timeout: 90000 }, async () => {
    const { page } = await signedIn(DESKTOP);
    const sent = [];
    page.on('websocket', (ws) => ws.on('framesent', (f) => {
      if (typeof f.payload === 'string' && f.payload.includes('media.upload.end')) sent.push(JSON.parse(f.payload));
    }));
    // Reconnect so that the listener sees the socket.
    await page.reload();
    await page.waitForFunction(() => document.body.dataset.conn === 'online');

    const data = randomBytes(700001); // several chunks, not a multiple of any block size
    await page.locator('#file-input').setInputFiles({ name: 'data.bin', mimeType: 'application/octet-stream', buffer: data });
    await page.locator('#tray .attachment[data-state=done]').waitFor({ timeout: 30000 });
    assert.equal(sent.length, 1);
    assert.equal(sent[0].payload.sha256, createHash('sha256').update(data).digest('hex'));
    assert.deepEqual(page.errors, []);
  });

  for (const [name, viewport] of [['phone', PHONE], ['desktop', DESKTOP]]) {
    test(`icons are Lucide SVGs, drawn without an emoji font (${name})`, { timeout: 60000 }, async () => {
      const { page } = await signedIn(viewport);
      // On a phone, attaching is behind "+"; the thread toggle has a text label next to its icon.
      const buttons = viewport === PHONE ? ['Open the chat list', 'Search messages'] : ['Search messages', 'Attach files'];
      for (const label of buttons) {
        const b = page.getByRole('button', { name: label, exact: true });
        const box = await b.locator('svg.lucide').boundingBox();
        assert.ok(box && box.width >= 16 && box.height >= 16, `${label}: a visible icon (${JSON.stringify(box)})`);
        assert.equal((await b.textContent()).trim(), '', `${label}: no glyph text`);
      }
      await send(page, `tool please (${name})`);
      // This turn's card: the gateway is shared, and history shows earlier turns' cards too.
      const asked = page.locator('.msg.role-user', { hasText: `tool please (${name})` });
      const card = asked.locator('xpath=following-sibling::details[contains(concat(" ", @class, " "), " ok ")][1]');
      await card.waitFor();
      assert.equal(await card.locator('.tool-emoji svg.icon-wrench').count(), 1);
      assert.equal(await card.locator('.tool-state svg.icon-check').count(), 1);
      const more = page.locator('.msg.role-assistant:not(.streaming) .msg-more svg.icon-ellipsis').first();
      await more.waitFor({ state: 'attached' });
      const text = await page.locator('#app').evaluate((el) => el.textContent);
      assert.doesNotMatch(text, /[\u{1F300}-\u{1FAFF}\u{23F3}\u{2630}]/u, 'no emoji glyphs in the page');
      await shot(page, `icons-${name}`);
      assert.deepEqual(page.errors, []);
    });
  }
});
