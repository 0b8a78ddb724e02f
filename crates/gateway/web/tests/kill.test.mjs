// Iris Web across a gateway killed with SIGKILL in the middle of an answer, at phone and desktop
// size: the page reconnects by itself to the gateway started again on the same port and data dir,
// keeps at least the text it showed (no text reaches a device before it is stored), and shows the
// answer as cut off, with Retry; a reloaded page shows the same. Several kill points: before the
// first chunk is shown, just after it, and well into the answer.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  DESKTOP, PHONE, browserSuite, openSignedIn, pageErrors, send, shot, waitOnline,
} from './harness.mjs';

const suite = browserSuite(before, after);
const SIZES = [['phone', PHONE], ['desktop', DESKTOP]];
// The demo agent's `bench`: 400 chunks 25 ms apart (ten seconds), each a number and a space.
const PROMPT = 'bench 400 25000';
// Kill points, as the number of chunks the page shows when the gateway is killed.
const KILL_AT = [0, 1, 37];

/** The text a message shows, whitespace collapsed. */
const shown = (loc) => loc.evaluate((el) => el.querySelector('.body').textContent.replace(/\s+/g, ' ').trim());

/** Waits until the streaming answer shows at least `n` chunks; returns its message id. */
async function streamingWith(page, n) {
  const handle = await page.waitForFunction((min) => {
    const el = document.querySelector('.msg.role-assistant.streaming');
    if (!el) return null;
    const words = el.querySelector('.body').textContent.trim().split(/\s+/).filter((w) => /^\d+$/.test(w));
    return words.length >= min ? el.dataset.id : null;
  }, n, { timeout: 30000, polling: 'raf' });
  return handle.jsonValue();
}

describe('a gateway killed mid-answer', { timeout: 600000 }, () => {
  for (const [size, viewport] of SIZES) {
    test(`the page reconnects, keeps what it showed and marks the answer cut off, with Retry (${size})`, { timeout: 240000 }, async () => {
      const gw = await suite.gateway();
      const { page } = await suite.device(viewport);
      await openSignedIn(page, gw.url);
      await send(page, PROMPT);

      for (const [i, killAt] of KILL_AT.entries()) {
        const id = await streamingWith(page, killAt);
        const answer = page.locator(`.msg.role-assistant[data-id="${id}"]`);
        await gw.kill();
        // What the page shows once the gateway is gone: everything it received.
        const before = await shown(answer);
        assert.ok(before.split(' ').filter(Boolean).length >= killAt, `at least ${killAt} chunks shown: "${before}"`);

        await gw.start();
        await waitOnline(page);
        const cut = page.locator(`.msg.role-assistant[data-id="${id}"][data-ended=cut_off]:not(.streaming)`);
        await cut.waitFor({ timeout: 30000 });
        const afterText = await shown(cut);
        assert.ok(afterText.startsWith(before), `kill point ${killAt}: the text shown before the kill is kept.\nbefore: "${before}"\nafter:  "${afterText}"`);
        assert.match(await cut.locator('.ended').textContent(), /Cut off/);
        await page.locator('#busy').waitFor({ state: 'hidden' });
        if (i === KILL_AT.length - 1) await shot(page, `killed-cut-off-${size}`);

        // A reloaded page shows the same answer, cut off, with the same text.
        await page.reload();
        await waitOnline(page);
        await cut.waitFor();
        assert.equal(await shown(cut), afterText, 'the reloaded page shows the same text');
        assert.match(await cut.locator('.ended').textContent(), /Cut off/);

        // Retry is offered, and it runs the prompt again (the next kill point's answer).
        await cut.locator('.msg-more').click();
        await page.getByRole('menuitem', { name: 'Retry' }).click();
        if (i === KILL_AT.length - 1) {
          await page.locator('.msg.role-assistant.streaming').waitFor();
          assert.equal(await page.locator('.msg.role-user').count(), 1, 'a retry adds no user message');
        }
      }
      assert.deepEqual(pageErrors(page), []);
    });
  }
});
