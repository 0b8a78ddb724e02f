//! Message actions in Iris Web, at phone and desktop size, against the real gateway and its demo
//! agent: on a desktop a bar with Copy shows over a message on hover or keyboard focus (Retry too
//! on a stopped answer), a right click opens the full menu; on a phone a long press opens it; Copy
//! puts the message's text on the clipboard and says "Copied"; Esc closes the menu.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  DESKTOP, PHONE, browserSuite, openSignedIn, pageErrors, send, shot,
} from './harness.mjs';

const suite = browserSuite(before, after);

const assistant = (page, text) => page.locator('.msg.role-assistant:not(.streaming)', { hasText: text });
const userMsg = (page, text) => page.locator('.msg.role-user', { hasText: text });

/** A device whose page may read and write the clipboard, signed in and online. */
async function clipboardDevice(gw, viewport) {
  const d = await suite.device(viewport);
  await d.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: new URL(gw.url).origin });
  await openSignedIn(d.page, gw.url);
  return d;
}

/** The opacity of a message's quick-action bar: what the eye sees of it. */
const barOpacity = (msg) => msg.locator('.msg-actions').evaluate((el) => getComputedStyle(el).opacity);
const clipboard = (page) => page.evaluate(() => navigator.clipboard.readText());

/** Holds a finger on the middle of `locator` until `until` resolves, then lifts it. */
async function longPress(page, locator, until) {
  const box = await locator.boundingBox();
  const point = { x: Math.round(box.x + box.width / 2), y: Math.round(box.y + 12) };
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Input.dispatchTouchEvent', { type: 'touchStart', touchPoints: [point] });
  try {
    await until();
  } finally {
    await cdp.send('Input.dispatchTouchEvent', { type: 'touchEnd', touchPoints: [] });
    await cdp.detach();
  }
}

describe('message actions', { timeout: 300000 }, () => {
  test('desktop: hover or focus shows Copy, Retry on a stopped answer; right click opens the menu (desktop)', { timeout: 120000 }, async () => {
    const gw = await suite.gateway();
    const { page } = await clipboardDevice(gw, DESKTOP);
    await send(page, 'copy me, please');
    const answer = assistant(page, 'Echo: copy me, please');
    await answer.waitFor();
    await page.mouse.move(5, 5);

    // Hidden until the pointer is over the answer, then Copy is there.
    assert.equal(await barOpacity(answer), '0');
    await answer.hover();
    await page.waitForFunction((el) => getComputedStyle(el).opacity === '1', await answer.locator('.msg-actions').elementHandle());
    await shot(page, 'actions-hover-desktop');
    await answer.getByRole('button', { name: 'Copy' }).click();
    await page.locator('#toasts', { hasText: 'Copied' }).waitFor();
    assert.equal(await clipboard(page), 'Echo: copy me, please');

    // Keyboard: the focus on the user message's Copy shows its bar; Enter copies.
    const mine = userMsg(page, 'copy me, please');
    await page.mouse.move(5, 5);
    assert.equal(await barOpacity(mine), '0');
    await mine.getByRole('button', { name: 'Copy' }).focus();
    assert.equal(await barOpacity(mine), '1');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => navigator.clipboard.readText().then((t) => t === 'copy me, please'));

    // A right click opens the full menu; Esc closes it and the focus goes back to the ⋯ button.
    await answer.locator('.body').click({ button: 'right' });
    const menu = page.getByRole('menu');
    await menu.getByRole('menuitem', { name: 'Copy text' }).waitFor();
    // The demo agent can take its newest turn back (rewind.test.mjs).
    assert.deepEqual(await menu.getByRole('menuitem').allTextContents(), ['Copy text', 'Regenerate', 'Read aloud', 'Delete']);
    await page.keyboard.press('Escape');
    await menu.waitFor({ state: 'detached' });
    assert.equal(await page.evaluate(() => document.activeElement.getAttribute('aria-label')), 'Message actions');

    // A stopped answer's bar offers Retry, which runs the prompt again.
    await send(page, 'linger');
    await page.locator('.msg.role-assistant.streaming', { hasText: 'Lingering.' }).waitFor();
    await page.getByRole('button', { name: 'Stop' }).click();
    const stopped = page.locator('.msg.role-assistant:not(.streaming)', { has: page.locator('.ended-stopped') });
    await stopped.waitFor();
    await page.locator('#busy').waitFor({ state: 'hidden' });
    await stopped.hover();
    const shown = (msg) => msg.locator('.msg-actions button:not([hidden])').allTextContents();
    assert.deepEqual(await shown(stopped), ['Copy', 'Retry', 'Read aloud']);
    await answer.hover();
    assert.deepEqual(await shown(answer), ['Copy', 'Read aloud'], 'an older complete answer offers no Retry');
    await stopped.hover();
    await stopped.getByRole('button', { name: 'Retry' }).click();
    await page.locator('.msg.role-assistant.streaming', { hasText: 'Lingering.' }).waitFor();
    assert.equal(await userMsg(page, 'linger').count(), 1, 'a retry adds no user message');
    await page.getByRole('button', { name: 'Stop' }).click();
    await page.locator('#busy').waitFor({ state: 'hidden' });
    assert.deepEqual(pageErrors(page), []);
  });

  test('phone: a long press opens the actions; Copy copies and says so; Esc closes (phone)', { timeout: 120000 }, async () => {
    const gw = await suite.gateway();
    const { page } = await clipboardDevice(gw, PHONE);
    await send(page, 'hold me');
    const answer = assistant(page, 'Echo: hold me');
    await answer.waitFor();
    assert.equal(await answer.locator('.msg-actions').isVisible(), false, 'no hover bar on a phone');

    // The menu opens while the finger still rests on the answer, and stays open when it lifts.
    const menu = page.getByRole('menu');
    await longPress(page, answer.locator('.body'), () => menu.getByRole('menuitem', { name: 'Copy text' }).waitFor());
    await shot(page, 'actions-long-press-phone');
    assert.deepEqual(await menu.getByRole('menuitem').allTextContents(), ['Copy text', 'Regenerate', 'Read aloud', 'Delete']);
    await menu.getByRole('menuitem', { name: 'Copy text' }).click();
    await page.locator('#toasts', { hasText: 'Copied' }).waitFor();
    assert.equal(await clipboard(page), 'Echo: hold me');
    await menu.waitFor({ state: 'detached' });

    // The user's own message too; Esc closes the menu without acting.
    const mine = userMsg(page, 'hold me');
    await longPress(page, mine.locator('.body'), () => menu.getByRole('menuitem', { name: 'Delete' }).waitFor());
    await page.keyboard.press('Escape');
    await menu.waitFor({ state: 'detached' });
    assert.equal(await mine.count(), 1);
    assert.deepEqual(pageErrors(page), []);
  });
});
