// Iris Web joining an answer mid-stream, drawing receipts, and its outbox: a page reloaded while
// the agent answers shows that answer streaming, with Stop, and every user message's receipt, the
// same as before the reload; a message typed while the connection is away is kept as "sending"
// and sent once when it is back.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { DESKTOP, PHONE, Proxy, browserSuite, openSignedIn, pageErrors, send, waitOnline } from './harness.mjs';

const suite = browserSuite(before, after);

/** The marks a user message shows beside its time (receipt and ticks, those not hidden). */
const marks = (page, text) => page.locator('.msg.role-user', { hasText: text }).first().evaluate((el) =>
  [...el.querySelectorAll('.meta .receipt, .meta .ticks')].filter((m) => !m.hidden).map((m) => m.textContent).join(' '));

describe('Iris Web receipts', { timeout: 120000 }, () => {
  test('a reload mid-answer shows the streaming answer and Stop again, and receipts stay', { timeout: 90000 }, async () => {
    const gw = await suite.gateway();
    const { page } = await suite.device(DESKTOP);
    await openSignedIn(page, gw.url);

    await send(page, 'hello');
    await page.locator('.msg.role-assistant:not(.streaming)', { hasText: 'Echo: hello' }).waitFor();
    const answered = page.locator('.msg.role-user', { hasText: 'hello' }).locator('.receipt-answered');
    await answered.waitFor({ state: 'attached' });
    assert.equal(await answered.getAttribute('title'), 'Answered');
    // One mark per state: the read ticks alone, not a receipt tick beside them.
    await page.locator('.msg.role-user', { hasText: 'hello' }).locator('.ticks', { hasText: '✓✓' }).waitFor();
    assert.equal(await marks(page, 'hello'), '✓✓');

    // 600 chunks 10 ms apart: six seconds of streaming.
    await send(page, 'bench 600 10000');
    await page.locator('.msg.role-assistant.streaming').waitFor();
    await page.locator('.msg.role-user', { hasText: 'bench 600' }).locator('.receipt-running').waitFor({ state: 'attached' });
    await page.reload();
    await waitOnline(page);
    const streaming = page.locator('.msg.role-assistant.streaming');
    await streaming.waitFor({ timeout: 3000 });
    await page.getByRole('button', { name: 'Stop' }).waitFor({ timeout: 3000 });
    // The text keeps growing on the reloaded page.
    const before = (await streaming.textContent()).length;
    await page.waitForFunction(
      (n) => {
        const el = document.querySelector('.msg.role-assistant.streaming');
        return el && el.textContent.length > n;
      },
      before,
      { timeout: 5000 },
    );
    assert.equal(await answered.getAttribute('title'), 'Answered', 'history brings the receipt back');
    await page.getByRole('button', { name: 'Stop' }).click();
    await page.locator('.msg.role-user', { hasText: 'bench 600' }).locator('.receipt-stopped').waitFor();
    assert.equal(await marks(page, 'bench 600'), '■', 'the stop mark in place of the ticks');
    assert.deepEqual(pageErrors(page), []);
  });

  test('a turn stopped before any text, and one the agent ends saying nothing, show how they ended, with Retry', { timeout: 90000 }, async () => {
    const gw = await suite.gateway();
    const { page } = await suite.device(DESKTOP);
    await openSignedIn(page, gw.url);

    // `hang`: the agent says nothing until it is cancelled.
    await send(page, 'hang');
    await page.locator('.msg.role-user', { hasText: 'hang' }).locator('.receipt-running').waitFor({ state: 'attached' });
    await page.getByRole('button', { name: 'Stop' }).click();
    const stopped = page.locator('.msg.role-assistant[data-ended=stopped]:not(.streaming)');
    await stopped.locator('.ended', { hasText: '■ Stopped' }).waitFor();
    await stopped.locator('.msg-actions .retry').waitFor({ state: 'attached' });
    const stoppedReceipt = page.locator('.msg.role-user', { hasText: 'hang' }).locator('.receipt-stopped');
    await stoppedReceipt.waitFor({ state: 'attached' });
    assert.equal(await stoppedReceipt.getAttribute('title'), 'Stopped', 'not "could not answer"');

    // `bench 0`: the agent ends its turn without a word.
    await send(page, 'bench 0');
    const failed = page.locator('.msg.role-assistant[data-ended=agent_failed]:not(.streaming)');
    await failed.locator('.ended', { hasText: 'Agent failed' }).waitFor();
    await page.locator('.msg.role-system', { hasText: 'The agent ended its turn without an answer.' }).waitFor();
    await page.locator('.msg.role-user', { hasText: 'bench 0' }).locator('.receipt-failed').waitFor({ state: 'attached' });
    // Retry runs the message again: a second failed try, said again.
    await failed.locator('.msg-actions .retry').dispatchEvent('click');
    await page.locator('.msg.role-system', { hasText: 'The agent ended its turn without an answer.' }).nth(1).waitFor();
    assert.deepEqual(pageErrors(page), []);
  });

  test('a message typed offline is kept as sending and runs once when the connection is back', { timeout: 90000 }, async () => {
    const gw = await suite.gateway();
    const proxy = await new Proxy(gw.port).listen();
    suite.cleanups.push(() => proxy.close());
    const { page } = await suite.device(PHONE);
    await openSignedIn(page, proxy.url);
    await send(page, 'before the gap');
    await page.locator('.msg.role-assistant:not(.streaming)', { hasText: 'Echo: before the gap' }).waitFor();

    proxy.cut();
    await page.locator('#banner', { hasText: 'Connection lost' }).waitFor();
    await send(page, 'typed offline');
    const pending = page.locator('.msg.pending-send', { hasText: 'typed offline' });
    await pending.waitFor();
    assert.equal(await pending.getByRole('button', { name: 'Cancel' }).isVisible(), true);
    assert.equal(await page.locator('.toast').count(), 0, 'no "send it again" toast');
    // Kept across reloads.
    const kept = await page.evaluate(() => JSON.parse(localStorage.getItem('iris.outbox')).map((e) => e.payload.text));
    assert.deepEqual(kept, ['typed offline']);

    proxy.restore();
    await waitOnline(page);
    await page.locator('.msg.role-assistant:not(.streaming)', { hasText: 'Echo: typed offline' }).waitFor();
    await pending.waitFor({ state: 'detached' });
    const counts = async () => page.evaluate(() => {
      const n = (sel, text) => [...document.querySelectorAll(sel)].filter((e) => e.dataset.text === text).length;
      return [n('.msg.role-user', 'typed offline'), n('.msg.role-assistant', 'Echo: typed offline'), document.querySelectorAll('.msg.pending-send').length];
    });
    assert.deepEqual(await counts(), [1, 1, 0]);
    await page.reload();
    await waitOnline(page);
    await page.locator('.msg.role-assistant:not(.streaming)', { hasText: 'Echo: typed offline' }).waitFor();
    assert.deepEqual(await counts(), [1, 1, 0], 'the gateway holds one message and one answer');
    assert.deepEqual(pageErrors(page), []);
  });
});
