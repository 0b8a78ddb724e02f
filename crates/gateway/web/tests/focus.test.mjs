// Iris Web opts in to focus: it receives the streaming of the chat it shows only, and a chat
// opened while its answer streams shows that answer's text so far at once, with Stop.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { DESKTOP, PHONE, browserSuite, newChat, openSignedIn, pageErrors, send } from './harness.mjs';

const suite = browserSuite(before, after);

/** Counts the `message.update` frames the page's WebSocket receives, per chat. */
function countUpdates(page) {
  const counts = new Map();
  page.on('websocket', (ws) => {
    ws.on('framereceived', ({ payload }) => {
      if (typeof payload !== 'string' || !payload.includes('"message.update"')) return;
      const frame = JSON.parse(payload);
      if (frame.type === 'message.update') counts.set(frame.chat_id, (counts.get(frame.chat_id) || 0) + 1);
    });
  });
  return counts;
}

/** Makes a channel with the page's "+" and names it; resolves once it is shown. */
async function newChannel(page, name) {
  await newChat(page, name);
}

describe('Iris Web focus', { timeout: 120000 }, () => {
  for (const [label, viewport] of [['phone', PHONE], ['desktop', DESKTOP]]) {
    test(`another chat's answer is not streamed to the page, and opening it shows its text at once (${label})`, { timeout: 90000 }, async () => {
      const gw = await suite.gateway();
      const watcher = await suite.device(viewport);
      const updates = countUpdates(watcher.page);
      await openSignedIn(watcher.page, gw.url);
      const title = await watcher.page.locator('#lane-title').textContent();

      const writer = await suite.device(DESKTOP);
      await openSignedIn(writer.page, gw.url);
      await newChannel(writer.page, 'Elsewhere');
      // Text, then nothing until it is stopped.
      await send(writer.page, 'linger');
      await writer.page.locator('.msg.role-assistant.streaming', { hasText: 'Lingering.' }).waitFor();
      const chatId = await writer.page.evaluate(() => JSON.parse(localStorage.getItem('iris.lane')).chat_id);
      assert.ok((updates.get(chatId) || 0) === 0, 'no streaming of a chat the page does not show');
      assert.equal(await watcher.page.locator('#lane-title').textContent(), title);

      // Opening the chat: the answer so far and Stop, without waiting for the agent.
      const open = watcher.page.getByRole('button', { name: 'Open the chat list' });
      if (await open.isVisible()) await open.click();
      await watcher.page.locator('li[data-chat] .chan', { hasText: 'Elsewhere' }).click();
      const streaming = watcher.page.locator('.msg.role-assistant.streaming', { hasText: 'Lingering.' });
      await streaming.waitFor({ timeout: 5000 });
      await watcher.page.getByRole('button', { name: 'Stop' }).waitFor({ timeout: 5000 });
      assert.equal(updates.get(chatId), 1, 'one update: the text so far');

      await watcher.page.getByRole('button', { name: 'Stop' }).click();
      await watcher.page.locator('.msg.role-assistant:not(.streaming)', { hasText: 'Lingering.' }).waitFor();
      await writer.page.locator('.msg.role-assistant:not(.streaming)', { hasText: 'Lingering.' }).waitFor();
      assert.deepEqual(pageErrors(watcher.page), []);
      assert.deepEqual(pageErrors(writer.page), []);
    });
  }
});
