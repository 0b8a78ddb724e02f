// The chat list as a user keeps it, at phone and desktop size, against the real gateway and its
// demo agent, with a second device (a laptop): chats are ordered by recent activity and show a
// line of their newest message, kept current live from any device; "+" makes a chat at once,
// ready to be written in, and its first message names it on every device. Deleting the message a
// chat's line shows never leaves its text there: the line moves to the newest message left, or,
// on a device that does not have the chat's messages, goes until the next connection.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  DESKTOP, PHONE, browserSuite, newChat, openSignedIn, pageErrors, send, shot,
} from './harness.mjs';

const suite = browserSuite(before, after);
const SIZES = [['phone', PHONE], ['desktop', DESKTOP]];

const answered = (page, text) => page.locator('.msg.role-assistant:not(.streaming)', { hasText: text });

/** Opens the chat list where it is a drawer (phone). */
async function openList(page) {
  const toggle = page.getByRole('button', { name: 'Open the chat list' });
  if (await toggle.isVisible() && !(await page.locator('body.sidebar-open').count())) {
    await toggle.click();
    await page.locator('body.sidebar-open').waitFor();
  }
}

/** Closes the drawer again (phone); a wide screen keeps its list. */
async function closeList(page) {
  if (await page.locator('body.sidebar-open').count()) {
    await page.keyboard.press('Escape');
    await page.locator('body.sidebar-open').waitFor({ state: 'detached' });
  }
}

/** The chats of the list (not threads), top to bottom. */
const chatNames = (page) => page.locator('#channels > li > .chan-row .chan-name').allTextContents();
const topRow = (page) => page.locator('#channels > li').first().locator(':scope > .chan-row');

describe('the chat list', { timeout: 300000 }, () => {
  for (const [size, viewport] of SIZES) {
    test(`a message in an older chat moves it to the top with its preview on another device (${size})`, { timeout: 120000 }, async () => {
      const gw = await suite.gateway();
      const { page } = await suite.device(viewport);
      const laptop = await suite.device(DESKTOP);
      await openSignedIn(page, gw.url);
      await openSignedIn(laptop.page, gw.url);

      await newChat(laptop.page, 'Older');
      await send(laptop.page, 'first words');
      await answered(laptop.page, 'Echo: first words').waitFor();
      await newChat(laptop.page, 'Newer');
      await send(laptop.page, 'newest words');
      await answered(laptop.page, 'Echo: newest words').waitFor();

      await openList(page);
      const newer = page.locator('#channels .chan', { hasText: 'Newer' });
      await newer.locator('.chan-preview', { hasText: 'Echo: newest words' }).waitFor();
      assert.deepEqual(await chatNames(page), ['Newer', 'Older', 'Default']);
      await closeList(page);

      // The laptop writes in the older chat: on this device it moves to the top, live.
      await laptop.page.locator('#channels .chan', { hasText: 'Older' }).click();
      await send(laptop.page, 'Moving **up**\n\nagain');
      await openList(page);
      await topRow(page).locator('.chan-name', { hasText: 'Older' }).waitFor();
      await topRow(page).locator('.chan-preview', { hasText: 'Moving up again' }).waitFor();
      await answered(laptop.page, 'Echo: Moving').waitFor();
      await topRow(page).locator('.chan-preview', { hasText: 'Echo: Moving up again' }).waitFor();
      assert.deepEqual(await chatNames(page), ['Older', 'Newer', 'Default']);
      await shot(page, `chatlist-order-${size}`);

      // A reload shows the same order and previews, from hello.ack alone.
      await page.reload();
      await openList(page);
      await topRow(page).locator('.chan-preview', { hasText: 'Echo: Moving up again' }).waitFor();
      assert.deepEqual(await chatNames(page), ['Older', 'Newer', 'Default']);
      assert.deepEqual(pageErrors(page), []);
      assert.deepEqual(pageErrors(laptop.page), []);
    });

    test(`one tap on + gives a chat that gets its title from its first message (${size})`, { timeout: 120000 }, async () => {
      const gw = await suite.gateway();
      const { page } = await suite.device(viewport);
      const laptop = await suite.device(DESKTOP);
      await openSignedIn(page, gw.url);
      await openSignedIn(laptop.page, gw.url);

      await openList(page);
      await page.getByRole('button', { name: 'New chat' }).click();
      await page.locator('#lane-title', { hasText: 'New chat' }).waitFor();
      assert.equal(await page.locator('dialog[open]').count(), 0, 'no name is asked for');
      assert.equal(await page.locator('body.sidebar-open').count(), 0, 'the chat is shown');
      assert.equal(await page.evaluate(() => document.activeElement.id), 'composer-input');
      await laptop.page.locator('#channels .chan-name', { hasText: 'New chat' }).waitFor();

      // Typed at once into the focused composer.
      await page.keyboard.type('## Trip to **Lisbon** in the spring with friends and family');
      await page.keyboard.press('Enter');
      const title = 'Trip to Lisbon in the spring with…';
      await page.locator('#lane-title', { hasText: title }).waitFor();
      assert.equal(await page.locator('#lane-title').textContent(), title);
      const row = laptop.page.locator('#channels .chan', { hasText: title });
      await row.waitFor();
      await row.locator('.chan-preview', { hasText: 'Trip to Lisbon in the spring' }).waitFor();
      assert.equal(await laptop.page.locator('#channels .chan-name', { hasText: 'New chat' }).count(), 0);
      assert.deepEqual((await chatNames(laptop.page))[0], title, 'the new chat is on top');
      await answered(page, 'Echo: ').waitFor();
      await shot(page, `chatlist-new-${size}`);
      assert.deepEqual(pageErrors(page), []);
      assert.deepEqual(pageErrors(laptop.page), []);
    });
  }

  test('deleting the message a chat\'s line shows takes its text away on every device', { timeout: 120000 }, async () => {
    const gw = await suite.gateway();
    const { page } = await suite.device(DESKTOP);
    const other = (await suite.device(DESKTOP)).page;
    await openSignedIn(page, gw.url);
    await openSignedIn(other, gw.url);
    await newChat(page, 'Notes');
    await send(page, 'first words');
    await answered(page, 'Echo: first words').waitFor();
    await send(page, 'private words');
    await answered(page, 'Echo: private words').waitFor();
    const notes = (p) => p.locator('.chan-row', { has: p.locator('.chan-name', { hasText: 'Notes' }) });
    for (const p of [page, other]) await notes(p).locator('.chan-preview', { hasText: 'Echo: private words' }).waitFor();

    const remove = async (msg) => {
      await msg.hover();
      await msg.getByRole('button', { name: 'Message actions' }).click();
      await page.getByRole('menuitem', { name: 'Delete' }).click();
      await page.locator('dialog#ask').getByRole('button', { name: 'Delete' }).click();
      await msg.waitFor({ state: 'detached' });
    };
    // Where the chat is open, the line shows the newest message left.
    await remove(answered(page, 'Echo: private words'));
    await notes(page).locator('.chan-preview', { hasText: /^private words$/ }).waitFor();
    await remove(page.locator('.msg.role-user', { hasText: 'private words' }));
    await notes(page).locator('.chan-preview', { hasText: 'Echo: first words' }).waitFor();
    // Where it is not, the line goes; never the deleted text.
    await notes(other).locator('.chan-name').waitFor();
    await other.waitForFunction(() => ![...document.querySelectorAll('.chan-preview')].some((e) => e.textContent.includes('private')));
    assert.equal(await notes(other).locator('.chan-preview').count(), 0);
    // The next connection has the newest message left.
    await other.reload();
    await notes(other).locator('.chan-preview', { hasText: 'Echo: first words' }).waitFor();
    assert.deepEqual(pageErrors(page), []);
    assert.deepEqual(pageErrors(other), []);
  });
});
