//! The inbox of Iris Web, with two devices of one person at phone and desktop size, against the
//! real gateway and its demo agent (`approve` asks an approval, `clarify` a question with the
//! choices Red and Blue, `/model` opens the model picker): every open picker of every chat is
//! listed in one place with its count on a top-bar button and in the tab title, an answer given
//! there closes it on every device, a device that was away neither pops up nor announces what was
//! answered meanwhile but still lists what is open, a model picker opens by itself only on the
//! device that asked for it, and toasts never cover the menu button, a menu or a dialog.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  DESKTOP, PHONE, Proxy, browserSuite, newChat, openSignedIn, pageErrors, send, shot, waitOnline,
} from './harness.mjs';

const suite = browserSuite(before, after);
const SIZES = [['phone', PHONE], ['desktop', DESKTOP]];

const picker = (page) => page.locator('dialog#picker[open]');
const inboxButton = (page) => page.locator('#open-inbox');
const assistant = (page, text) => page.locator('.msg.role-assistant:not(.streaming)', { hasText: text });

/** Waits until the inbox button says `n` wait (hidden for none). */
async function waitCount(page, n) {
  await page.waitForFunction((count) => {
    const b = document.getElementById('open-inbox');
    return count === 0 ? b.hidden : !b.hidden && b.getAttribute('aria-label') === `Waiting for you: ${count}`;
  }, n);
}

async function openChatList(page) {
  const toggle = page.getByRole('button', { name: 'Open the chat list' });
  if (await toggle.isVisible()) await toggle.click();
}

async function newChannel(page, name) {
  await newChat(page, name);
}

async function openChat(page, name) {
  await openChatList(page);
  await page.locator('li[data-chat] .chan', { hasText: name }).click();
  await page.locator('#lane-title', { hasText: name }).waitFor();
}

/** The rows of the open inbox: [chat, what]. */
async function inboxRows(page) {
  return page.locator('dialog#inbox[open] .inbox-item').evaluateAll((items) => items.map((li) => [
    li.querySelector('.inbox-lane').textContent, li.querySelector('.inbox-what').textContent,
  ]));
}

/** Boxes on screen that overlap. */
const overlaps = (a, b) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;

describe('the inbox of open pickers', { timeout: 600000 }, () => {
  for (const [size, viewport] of SIZES) {
    test(`two open pickers of two chats are listed in order, counted, and answered from the inbox (${size})`, { timeout: 150000 }, async () => {
      const gw = await suite.gateway();
      const { page } = await suite.device(viewport);
      const other = await suite.device(DESKTOP);
      await openSignedIn(page, gw.url);
      await openSignedIn(other.page, gw.url);

      await send(page, 'approve this');
      await picker(page).getByRole('button', { name: 'Allow once' }).waitFor();
      await picker(page).getByRole('button', { name: 'Later' }).click();
      await waitCount(page, 1);
      await newChannel(page, 'Second');
      await send(page, 'clarify');
      await picker(page).getByRole('button', { name: 'Red' }).waitFor();
      await picker(page).getByRole('button', { name: 'Later' }).click();

      await waitCount(page, 2);
      await waitCount(other.page, 2);
      assert.equal(await page.title(), '[2 waiting] Second · Iris');
      await inboxButton(page).click();
      await page.locator('dialog#inbox[open]').waitFor();
      const rows = await inboxRows(page);
      assert.equal(rows.length, 2);
      assert.equal(rows[0][0], 'Default');
      assert.match(rows[0][1], /^Approval requested/);
      assert.equal(rows[1][0], 'Second');
      assert.match(rows[1][1], /^Question/);
      const box = await page.locator('dialog#inbox[open]').boundingBox();
      assert.ok(box.x >= 0 && box.x + box.width <= viewport.width && box.y >= 0 && box.y + box.height <= viewport.height, 'the inbox fits the screen');
      await shot(page, `inbox-${size}`);

      // The approval of Default, answered from the inbox while Second is shown.
      await page.locator('dialog#inbox[open] .inbox-item').first().getByRole('button', { name: 'Answer' }).click();
      await picker(page).getByRole('button', { name: 'Allow once' }).click();
      await waitCount(page, 1);
      // The answer in Default is unread here: its count follows the waiting one, as before.
      await page.waitForFunction(() => document.title === '[1 waiting] (1) Second · Iris');
      await other.page.locator('.picker-card.done', { hasText: 'answered elsewhere: Allow once' }).waitFor();
      await waitCount(other.page, 1);
      await assistant(other.page, 'Permission granted: allow_once.').waitFor();

      // The last one, answered in its own chat: nothing waits, and the title is as before.
      await inboxButton(page).click();
      await page.locator('dialog#inbox[open] .inbox-item').getByRole('button', { name: 'Answer' }).click();
      await picker(page).getByRole('button', { name: 'Blue' }).click();
      await waitCount(page, 0);
      await assistant(page, 'You chose Blue.').waitFor();
      assert.equal(await page.title(), '(1) Second · Iris');
      await waitCount(other.page, 0);
      assert.deepEqual(pageErrors(page), []);
      assert.deepEqual(pageErrors(other.page), []);
    });

    test(`a device that was away shows nothing answered meanwhile, and lists what is still open (${size})`, { timeout: 150000 }, async () => {
      const gw = await suite.gateway();
      const proxy = await new Proxy(gw.port).listen();
      suite.cleanups.push(() => proxy.close());
      const { page } = await suite.device(viewport);
      const other = await suite.device(DESKTOP);
      await openSignedIn(page, proxy.url);
      await openSignedIn(other.page, gw.url);
      await send(page, 'hello');
      await assistant(page, 'Echo: hello').waitFor();

      proxy.cut();
      await page.locator('#banner', { hasText: 'Connection lost' }).waitFor();
      // Answered while away.
      await send(other.page, 'approve this');
      await picker(other.page).getByRole('button', { name: 'Allow once' }).click();
      await assistant(other.page, 'Permission granted: allow_once.').waitFor();
      // Still open when it comes back.
      await send(other.page, 'clarify');
      await picker(other.page).getByRole('button', { name: 'Later' }).click();
      await waitCount(other.page, 1);

      proxy.restore();
      await waitOnline(page);
      await page.locator('.picker-card.done', { hasText: 'answered elsewhere: Allow once' }).waitFor();
      await waitCount(page, 1);
      assert.equal(await picker(page).count(), 0, 'no dialog opens by itself');
      const toasts = await page.locator('#toasts .toast').allTextContents();
      assert.ok(!toasts.some((t) => /Approval needed/.test(t)), `no toast for the answered approval: ${JSON.stringify(toasts)}`);
      assert.ok(toasts.length <= 1 && toasts.every((t) => /Question from the agent/.test(t)), `only the open question is announced: ${JSON.stringify(toasts)}`);

      // A reload, whose cursor is past the question: still listed, still no dialog.
      await page.reload();
      await waitOnline(page);
      await waitCount(page, 1);
      assert.equal(await picker(page).count(), 0);
      assert.equal(await page.locator('#toasts .toast').count(), 0, 'a reload announces nothing');
      await inboxButton(page).click();
      assert.deepEqual((await inboxRows(page)).map((r) => r[0]), ['Default']);
      await page.locator('dialog#inbox[open] .inbox-item').getByRole('button', { name: 'Answer' }).click();
      await picker(page).getByRole('button', { name: 'Red' }).click();
      await assistant(other.page, 'You chose Red.').waitFor();
      await waitCount(other.page, 0);
      await waitCount(page, 0);
      assert.deepEqual(pageErrors(page), []);
    });

    test(`a model picker opens by itself only on the device that asked (${size})`, { timeout: 120000 }, async () => {
      const gw = await suite.gateway();
      const { page } = await suite.device(viewport);
      const other = await suite.device(DESKTOP);
      await openSignedIn(page, gw.url);
      await openSignedIn(other.page, gw.url);
      await send(page, 'hello');
      await assistant(other.page, 'Echo: hello').waitFor();

      await send(page, '/model');
      await picker(page).getByRole('heading', { name: 'Choose a model' }).waitFor();
      await picker(page).getByRole('button', { name: 'Later' }).click();
      await waitCount(page, 1);
      await waitCount(other.page, 1);
      assert.equal(await picker(other.page).count(), 0, 'no dialog on the other device');
      await other.page.locator('.picker-card', { hasText: 'Choose a model' }).waitFor();
      assert.equal(await picker(page).count(), 0, '"Later" keeps it closed');

      await inboxButton(page).click();
      await page.locator('dialog#inbox[open] .inbox-item').getByRole('button', { name: 'Answer' }).click();
      await picker(page).getByRole('button', { name: 'Demo Verbose' }).click();
      await waitCount(page, 0);
      await waitCount(other.page, 0);
      assert.deepEqual(pageErrors(page), []);
      assert.deepEqual(pageErrors(other.page), []);
    });

    test(`toasts cover neither the menu button, nor a menu, nor a dialog (${size})`, { timeout: 120000 }, async () => {
      const gw = await suite.gateway();
      const { page } = await suite.device(viewport);
      const other = await suite.device(DESKTOP);
      await openSignedIn(page, gw.url);
      await openSignedIn(other.page, gw.url);

      // The top-bar menu is open when an approval arrives from the other device: its dialog opens,
      // and no "Approval needed" toast lies over it (the dialog says so already).
      await page.getByRole('button', { name: 'Menu' }).click();
      await page.locator('#menu:not([hidden])').waitFor();
      await send(other.page, 'approve this');
      await picker(page).waitFor();
      // The notification comes between the picker and `agent.busy {waiting_input}`.
      await page.locator('#busy-text', { hasText: 'Waiting for you' }).waitFor({ state: 'attached' });
      assert.equal(await page.locator('#toasts .toast', { hasText: 'Approval needed' }).count(), 0, 'no toast over the approval');
      // A toast shown while the dialog is open sits beside it, not on it.
      await page.evaluate(async () => (await import('./assets/ui.js')).toast('Something else', 'note', 'Another note'));
      const toast = page.locator('#toasts .toast', { hasText: 'Another note' });
      await toast.waitFor();
      const t = await toast.boundingBox();
      for (const [what, locator] of [['the menu button', page.locator('#open-menu')], ['the menu', page.locator('#menu')], ['the dialog', picker(page)]]) {
        const b = await locator.boundingBox();
        assert.ok(b, `${what} shows`);
        assert.ok(!overlaps(t, b), `the toast ${JSON.stringify(t)} does not cover ${what} ${JSON.stringify(b)}`);
      }
      assert.ok(t.y >= 0 && t.y + t.height <= viewport.height && t.x >= 0 && t.x + t.width <= viewport.width, 'the toast is on screen');
      await shot(page, `toast-dialog-${size}`);
      await picker(page).getByRole('button', { name: 'Later' }).click();

      // A chat's popup menu with a toast (shown by the page's own toast()) while it is open.
      await openChatList(page);
      await page.locator('li[data-chat]', { hasText: 'Default' }).locator('.chan-more').click();
      const popup = page.locator('.popup');
      await popup.waitFor();
      await page.evaluate(async () => (await import('./assets/ui.js')).toast('Something to say', 'note', 'A note'));
      const note = page.locator('#toasts .toast', { hasText: 'A note' });
      await note.waitFor();
      const p = await popup.boundingBox();
      const n = await note.boundingBox();
      assert.ok(!overlaps(n, p), `the toast ${JSON.stringify(n)} does not cover the popup ${JSON.stringify(p)}`);
      assert.ok(await popup.isVisible());
      await page.keyboard.press('Escape');
      assert.deepEqual(pageErrors(page), []);
    });
  }
});
