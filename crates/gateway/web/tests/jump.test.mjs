//! The jump to the first unread message in Iris Web, with two devices of one person at phone and
//! desktop size, against the real gateway and its demo agent: answers that arrived while this
//! device showed another chat make opening the chat show "N new ↑", whose click brings the first
//! of them into view (and then the scroll-to-bottom button takes it to the end); answers that
//! arrive while it reads further up show "N new ↓", which jumps down to the first of them. The
//! button goes once that message has been seen.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  DESKTOP, PHONE, browserSuite, openSignedIn, pageErrors, newChat, send, shot,
} from './harness.mjs';

const suite = browserSuite(before, after);
const SIZES = [['phone', PHONE], ['desktop', DESKTOP]];

/** Messages the laptop sends: each answer is unread on the other device, and more than a screen. */
const SENT = 15;
const line = (i) => `laptop ${String(i).padStart(2, '0')}`;
const answer = (page, text) => page.locator('.msg.role-assistant:not(.streaming)', { hasText: text });

/** Whether any part of `locator` shows inside the transcript's scroller. */
const inView = (locator) => locator.evaluate((el) => {
  const r = el.getBoundingClientRect();
  const s = document.getElementById('scroller').getBoundingClientRect();
  return r.bottom > s.top && r.top < s.bottom;
});

async function openChat(page, name) {
  const toggle = page.getByRole('button', { name: 'Open the chat list' });
  if (await toggle.isVisible()) await toggle.click();
  await page.locator('li[data-chat] .chan', { hasText: name }).click();
  await page.locator('#lane-title', { hasText: name }).waitFor();
}

describe('jump to the first unread message', { timeout: 300000 }, () => {
  for (const [size, viewport] of SIZES) {
    test(`"N new" jumps to the first unread answer, opened later or arrived while reading up (${size})`, { timeout: 150000 }, async () => {
      const gw = await suite.gateway();
      const { page } = await suite.device(viewport);
      const laptop = await suite.device(DESKTOP);
      await openSignedIn(page, gw.url);
      await openSignedIn(laptop.page, gw.url);

      // This device shows another chat while the laptop talks in Default.
      await newChat(page, 'Elsewhere');
      for (let i = 1; i <= SENT; i++) {
        await send(laptop.page, line(i));
        await answer(laptop.page, `Echo: ${line(i)}`).waitFor();
      }
      await page.waitForFunction((n) => document.title === `(${n}) Elsewhere · Iris`, SENT);

      // Opening Default: the end shows, the first unread answer is above it, out of view.
      await openChat(page, 'Default');
      const jump = page.locator('#jump-unread');
      await jump.waitFor();
      assert.equal(await jump.textContent(), `${SENT} new ↑`);
      const first = answer(page, `Echo: ${line(1)}`);
      assert.equal(await inView(first), false);
      assert.equal(await inView(answer(page, `Echo: ${line(SENT)}`)), true);
      await shot(page, `jump-opened-${size}`);

      // A click brings it into view, and the button goes; the end is one more click away.
      await page.getByRole('button', { name: `Jump to the first of ${SENT} new messages` }).click();
      await jump.waitFor({ state: 'hidden' });
      assert.equal(await inView(first), true);
      await page.getByRole('button', { name: /^Scroll to the latest messages/ }).click();
      await page.waitForFunction(() => {
        const s = document.getElementById('scroller');
        return s.scrollHeight - s.scrollTop - s.clientHeight < 5;
      });

      // Reading further up while two more answers arrive: "2 new ↓" jumps down to the first.
      await page.locator('#scroller').evaluate((s) => { s.scrollTop = 0; });
      await page.getByRole('button', { name: /^Scroll to the latest messages/ }).waitFor();
      await send(laptop.page, 'later one');
      await answer(laptop.page, 'Echo: later one').waitFor();
      await send(laptop.page, 'later two');
      await answer(page, 'Echo: later two').waitFor({ state: 'attached' });
      await answer(page, 'Echo: later one').waitFor({ state: 'attached' });
      await page.waitForFunction(() => document.getElementById('jump-unread').textContent === '2 new ↓');
      const later = answer(page, 'Echo: later one');
      assert.equal(await inView(later), false);
      await jump.click();
      await jump.waitFor({ state: 'hidden' });
      assert.equal(await inView(later), true);
      assert.deepEqual(pageErrors(page), []);
    });
  }
});
