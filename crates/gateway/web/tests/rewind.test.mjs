//! Regenerate and edit in Iris Web, against the real gateway and its demo agent (which forks its
//! sessions, and whose `recall` keyword names the earlier turns its session holds): the newest
//! answer offers Regenerate and the message it answers offers Edit, on hover at desktop size and
//! in the message menu on a phone; an older turn offers neither. Regenerate runs the message again
//! from before it; Edit puts the text in the message box, and Send runs the edit instead. What was
//! taken back stays dimmed and marked "Replaced", on another device too, and the agent no longer
//! remembers it. Esc leaves an edit.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  DESKTOP, PHONE, browserSuite, openSignedIn, pageErrors, send, shot,
} from './harness.mjs';

const suite = browserSuite(before, after);

const answers = (page, text) => page.locator('.msg.role-assistant:not(.streaming)', { hasText: text });
const userMsg = (page, text) => page.locator('.msg.role-user', { hasText: text });
/** The quick actions a message shows now. */
const quick = (msg) => msg.locator('.msg-actions button:not([hidden])').allTextContents();

/** The items of a message's ⋯ menu, which is closed again. */
async function menuItems(page, msg) {
  await msg.getByRole('button', { name: 'Message actions' }).click();
  const menu = page.getByRole('menu');
  await menu.getByRole('menuitem').first().waitFor();
  const items = await menu.getByRole('menuitem').allTextContents();
  await page.keyboard.press('Escape');
  await menu.waitFor({ state: 'detached' });
  return items;
}

/** Waits until the lane is idle (no busy bar). */
const idle = (page) => page.locator('#busy').waitFor({ state: 'hidden' });

describe('regenerate and edit', { timeout: 300000 }, () => {
  test('desktop: Regenerate and Edit on the newest turn only; what they replace stays, marked, on every device (desktop)', { timeout: 150000 }, async () => {
    const gw = await suite.gateway();
    const { page } = await suite.device(DESKTOP);
    await openSignedIn(page, gw.url);
    await send(page, 'alpha');
    await answers(page, 'Echo: alpha').waitFor();
    await send(page, 'recall beta');
    const recalled = answers(page, 'Recall: 1 earlier turns: alpha');
    await recalled.waitFor();
    await idle(page);

    // The newest answer offers Regenerate, the message it answers Edit; the older turn neither.
    await recalled.hover();
    assert.deepEqual(await quick(recalled), ['Copy', 'Regenerate', 'Read aloud']);
    await userMsg(page, 'recall beta').hover();
    assert.deepEqual(await quick(userMsg(page, 'recall beta')), ['Copy', 'Edit']);
    const older = answers(page, 'Echo: alpha');
    await older.hover();
    assert.deepEqual(await quick(older), ['Copy', 'Read aloud']);
    await userMsg(page, 'alpha').first().hover();
    assert.deepEqual(await quick(userMsg(page, 'alpha').first()), ['Copy']);
    assert.deepEqual(await menuItems(page, recalled), ['Copy text', 'Regenerate', 'Read aloud', 'Delete']);
    assert.deepEqual(await menuItems(page, older), ['Copy text', 'Read aloud', 'Delete']);

    // Regenerate: a new answer; the first is kept, dimmed and marked.
    await recalled.hover();
    await recalled.getByRole('button', { name: 'Regenerate' }).click();
    await page.waitForFunction(() => document.querySelectorAll('.msg.role-assistant[data-state="replaced"]').length === 1);
    await idle(page);
    assert.equal(await recalled.count(), 2, 'the new answer and the one it replaced');
    assert.equal(await recalled.first().locator('.replaced').textContent(), 'Replaced');
    assert.equal(await recalled.last().getAttribute('data-state'), null, 'the new answer is not replaced');
    assert.equal(await userMsg(page, 'recall beta').count(), 1, 'a regenerate adds no user message');

    // Edit: the text goes to the message box; Esc leaves the edit and empties the box.
    const box = page.getByRole('textbox', { name: 'Message' });
    const asked = userMsg(page, 'recall beta');
    await asked.hover();
    await asked.getByRole('button', { name: 'Edit' }).click();
    assert.equal(await box.inputValue(), 'recall beta');
    await page.locator('#editing').waitFor();
    await page.keyboard.press('Escape');
    await page.locator('#editing').waitFor({ state: 'hidden' });
    assert.equal(await box.inputValue(), '');

    // Edit again, change it and send: the edit runs instead, the old message and its answers replaced.
    await asked.hover();
    await asked.getByRole('button', { name: 'Edit' }).click();
    await box.fill('recall delta');
    await shot(page, 'rewind-editing-desktop');
    await box.press('Enter');
    await page.locator('#editing').waitFor({ state: 'hidden' });
    await userMsg(page, 'recall delta').waitFor();
    await page.waitForFunction(() => document.querySelector('.msg.role-user[data-state="replaced"]') !== null);
    await idle(page);
    assert.equal(await asked.getAttribute('data-state'), 'replaced');
    assert.equal(await page.locator('.msg.role-assistant[data-state="replaced"]').count(), 2);
    assert.equal(await recalled.count(), 3, 'the edit was answered');

    // The agent remembers the turns that stand, not those taken back.
    await send(page, 'recall gamma');
    await answers(page, 'Recall: 2 earlier turns: alpha / recall delta').waitFor();
    await shot(page, 'rewind-replaced-desktop');

    // Another device shows the same: the replaced messages marked, Regenerate on the newest.
    const other = await suite.device(PHONE);
    await openSignedIn(other.page, gw.url);
    const newest = answers(other.page, 'Recall: 2 earlier turns');
    await newest.waitFor();
    assert.equal(await other.page.locator('.msg[data-state="replaced"] .replaced').count(), 3);
    assert.equal(await userMsg(other.page, 'recall beta').getAttribute('data-state'), 'replaced');
    assert.deepEqual(await menuItems(other.page, newest), ['Copy text', 'Regenerate', 'Read aloud', 'Delete']);
    assert.deepEqual(await menuItems(other.page, userMsg(other.page, 'recall gamma')), ['Copy text', 'Edit', 'Delete']);
    assert.deepEqual(await menuItems(other.page, userMsg(other.page, 'recall delta')), ['Copy text', 'Delete']);
    assert.deepEqual(pageErrors(page), []);
    assert.deepEqual(pageErrors(other.page), []);
  });

  test('phone: Regenerate from the message menu; nothing is offered while the agent works (phone)', { timeout: 120000 }, async () => {
    const gw = await suite.gateway();
    const { page } = await suite.device(PHONE);
    await openSignedIn(page, gw.url);
    await send(page, 'first');
    await answers(page, 'Echo: first').waitFor();
    await idle(page);

    // While a turn runs, the earlier answer offers nothing to take back.
    await send(page, 'linger');
    await page.locator('.msg.role-assistant.streaming', { hasText: 'Lingering.' }).waitFor();
    assert.deepEqual(await menuItems(page, answers(page, 'Echo: first')), ['Copy text', 'Read aloud', 'Delete']);
    await page.getByRole('button', { name: 'Stop' }).click();
    await idle(page);

    await send(page, 'recall again');
    const recalled = answers(page, 'Recall: ');
    await recalled.waitFor();
    await idle(page);
    const before = await recalled.textContent();
    await recalled.getByRole('button', { name: 'Message actions' }).click();
    await page.getByRole('menu').getByRole('menuitem', { name: 'Regenerate' }).click();
    await page.waitForFunction(() => document.querySelector('.msg.role-assistant[data-state="replaced"]') !== null);
    await idle(page);
    assert.equal(await recalled.count(), 2);
    assert.equal(await recalled.last().getAttribute('data-state'), null);
    assert.equal((await recalled.last().locator('.body').textContent()).trim(), (await recalled.first().locator('.body').textContent()).trim(), 'the same turn, run again from the same place');
    assert.ok(before.includes('Recall: '));
    await shot(page, 'rewind-regenerated-phone');
    assert.deepEqual(pageErrors(page), []);
  });
});
