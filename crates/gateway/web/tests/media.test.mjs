// Media never run in the page's origin: in Debian's headless Chromium against the real gateway,
// an SVG carrying a script and an HTML file passed off as a PNG are offered as downloads under
// their names, are never shown inline, and cannot touch the page's storage (the token) even when
// their blob: address is opened directly.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';

import { blobType, showsInline } from '../assets/util.js';
import { DESKTOP, PHONE, browserSuite, noisePng, openSignedIn, send } from './harness.mjs';

const suite = browserSuite(before, after);

// Each would write a marker into the page's storage and read the token, were it ever executed
// in the gateway's origin.
const PAYLOAD = "localStorage.setItem('pwned', String(localStorage.getItem('iris.token')))";
const SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>${PAYLOAD}</script><rect width="10" height="10"/></svg>`;
const HTML = `<!DOCTYPE html><html><body><script>${PAYLOAD}</script>cat</body></html>`;

/** A device whose page records the type of every blob it turns into an object URL. */
async function device(viewport) {
  const d = await suite.device(viewport);
  await d.page.addInitScript(() => {
    const make = URL.createObjectURL.bind(URL);
    window.blobTypes = [];
    URL.createObjectURL = (blob) => {
      window.blobTypes.push(blob.type);
      return make(blob);
    };
  });
  return d;
}

const pwned = (page) => page.evaluate(() => localStorage.getItem('pwned'));

test('only a verified raster image keeps its type in a blob', () => {
  assert.equal(blobType({ kind: 'image', mime: 'image/png' }), 'image/png');
  assert.equal(blobType({ kind: 'image', mime: 'image/svg+xml' }), 'application/octet-stream');
  assert.equal(blobType({ kind: 'file', mime: 'image/png' }), 'application/octet-stream');
  assert.equal(blobType({ kind: 'file', mime: 'text/html' }), 'application/octet-stream');
  assert.equal(showsInline({ kind: 'image', mime: 'text/html' }), false);
  assert.equal(showsInline({ kind: 'image', mime: 'IMAGE/JPEG' }), true);
});

describe('media in Iris Web', { timeout: 180000 }, () => {
  test('an SVG with a script and HTML sent as an image are downloads that never run', { timeout: 120000 }, async () => {
    const gw = await suite.gateway();
    const a = await device(DESKTOP);
    const b = await device(PHONE);
    await openSignedIn(a.page, gw.url);
    await openSignedIn(b.page, gw.url);

    // The browser calls cat.png an image/png: the app uploads it as kind "image".
    await a.page.locator('#file-input').setInputFiles([
      { name: 'evil.svg', mimeType: 'image/svg+xml', buffer: Buffer.from(SVG) },
      { name: 'cat.png', mimeType: 'image/png', buffer: Buffer.from(HTML) },
      { name: 'noise.png', mimeType: 'image/png', buffer: noisePng(40, 30) },
    ]);
    await a.page.locator('#tray .attachment[data-state=done]').nth(2).waitFor({ timeout: 30000 });
    assert.equal(await a.page.locator('#tray .attachment', { hasText: 'evil.svg' }).locator('img').count(), 0,
      'no preview of an SVG');
    await send(a.page, 'three files');

    for (const { page, context } of [a, b]) {
      const msg = page.locator('.msg.role-user', { hasText: 'three files' });
      await msg.locator('.file-chip', { hasText: 'cat.png' }).waitFor();
      await msg.locator('.file-chip', { hasText: 'evil.svg' }).waitFor();
      const img = msg.locator('img.inline-image');
      await page.waitForFunction((el) => el.complete && el.naturalWidth > 0, await img.elementHandle(), { timeout: 30000 });
      assert.equal(await img.count(), 1, 'only the real PNG is shown inline');
      assert.equal(await img.getAttribute('alt'), 'noise.png');

      for (const [name, body] of [['evil.svg', SVG], ['cat.png', HTML]]) {
        const chip = msg.locator('.file-chip', { hasText: name });
        const [download] = await Promise.all([page.waitForEvent('download'), chip.getByRole('button', { name: 'Download' }).click()]);
        assert.equal(download.suggestedFilename(), name, 'the download keeps its name');
        assert.equal(readFileSync(await download.path(), 'utf8'), body, 'and its bytes');

        // Even opened directly, the blob: address is a download, never a document of this origin.
        const tab = await context.newPage();
        const opened = tab.waitForEvent('download');
        await tab.goto(download.url()).catch((e) => assert.match(String(e), /Download is starting|ERR_ABORTED/));
        assert.equal((await opened).suggestedFilename().length > 0, true);
        await tab.close();
      }
      const types = await page.evaluate(() => window.blobTypes);
      assert.ok(types.every((t) => t === 'image/png' || t === 'application/octet-stream'), `inert blob types only: ${types}`);
      assert.equal(await pwned(page), null, 'no script of a media file ever ran in the page');
      assert.equal(context.pages().length, 1, 'no tab was opened by the page');
    }
  });
});
