// Unread counts in Iris Web with two devices of one person, at phone and desktop size, against the
// real gateway and its demo agent: a message the person sends from another device is their own
// and never unread here (tab title, chat list badge); the agent's answer to it is.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  DESKTOP, PHONE, browserSuite, openSignedIn, pageErrors, newChat, send, shot,
} from './harness.mjs';

const suite = browserSuite(before, after);
const SIZES = [['phone', PHONE], ['desktop', DESKTOP]];

const assistant = (page, text) => page.locator('.msg.role-assistant:not(.streaming)', { hasText: text });

/** The chat list's badge of the chat named `name`: its text, or '' without one. */
const badge = (page, name) => page.locator('li[data-chat] .chan', { hasText: name }).evaluate((el) => {
  const b = el.querySelector('.unread');
  return b ? `${b.textContent} (${b.getAttribute('aria-label')})` : '';
});

describe('unread counts', { timeout: 300000 }, () => {
  for (const [size, viewport] of SIZES) {
    test(`what one sends from another device is never unread; the answer to it is (${size})`, { timeout: 120000 }, async () => {
      const gw = await suite.gateway();
      const { page } = await suite.device(viewport);
      const laptop = await suite.device(DESKTOP);
      await openSignedIn(page, gw.url);
      await openSignedIn(laptop.page, gw.url);

      // This device reads another chat.
      await newChat(page, 'Elsewhere');
      assert.equal(await page.title(), 'Elsewhere · Iris');

      // The same person writes in Default from the laptop; the agent answers.
      await send(laptop.page, 'sent from my laptop');
      await assistant(laptop.page, 'Echo: sent from my laptop').waitFor();
      // A round trip of this device's own after it: everything before has reached this page.
      await send(page, 'here');
      await assistant(page, 'Echo: here').waitFor();

      assert.equal(await page.title(), '(1) Elsewhere · Iris', 'the answer is unread, the message sent from the laptop is not');
      assert.equal(await badge(page, 'Default'), '1 (1 unread)');
      assert.equal(await badge(page, 'Elsewhere'), '');
      await shot(page, `unread-own-${size}`);
      assert.deepEqual(pageErrors(page), []);
    });
  }
});
