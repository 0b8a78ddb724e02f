// The Settings view: the theme (applied at once, and before the first paint after a reload), the
// paired devices with this one marked, pairing a device through this one's code, and revoking
// devices: the revoked page loses its connection and is signed out, a device offers no Revoke
// for the device that paired it, a stale Revoke is refused with the reason, and a device may
// revoke itself. A revoked browser forgets what it kept of the gateway (token, place, unsent
// messages, the transcript on screen) and takes a new device id, so that it can be paired again;
// one revoked while it was away learns so when it comes back.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  DESKTOP, PHONE, browserSuite, openSignedIn, pageErrors, send, shot, waitOnline,
} from './harness.mjs';

const suite = browserSuite(before, after);
const SIZES = [['phone', PHONE], ['desktop', DESKTOP]];

async function openSettings(page) {
  await page.getByRole('button', { name: 'Menu', exact: true }).click();
  await page.getByRole('menuitem', { name: 'Settings…' }).click();
  const dialog = page.getByRole('dialog', { name: 'Settings' });
  await dialog.waitFor();
  return dialog;
}

const theme = (page) => page.evaluate(() => document.documentElement.dataset.theme);
const background = (page) => page.evaluate(() => getComputedStyle(document.body).backgroundColor);
const DARK_BG = 'rgb(15, 17, 23)';
const LIGHT_BG = 'rgb(246, 247, 251)';

/** The devices the Settings view lists, and the one named `name`. */
const rows = (dialog) => dialog.locator('.settings-device');
const row = (dialog, name) => rows(dialog).filter({ has: dialog.page().locator('.settings-device-name', { hasText: name }) });

/** Makes a pairing link in `page`'s Settings and leaves its dialog open; returns the link. */
async function pairingLink(page, dialog) {
  await dialog.getByRole('button', { name: 'Pair a new device…' }).click();
  const ask = page.locator('dialog#ask');
  await ask.getByRole('heading', { name: 'Pair another device' }).waitFor();
  return ask.getByRole('textbox', { name: 'Pairing link' }).inputValue();
}

/** A new browser paired with `link`, online. */
async function pairedBrowser(link, viewport, name) {
  const { page } = await suite.device(viewport);
  await page.addInitScript((n) => localStorage.setItem('iris.device_name', n), name);
  await page.goto(link);
  await waitOnline(page);
  return page;
}

describe('Settings', { timeout: 400000 }, () => {
  for (const [size, viewport] of SIZES) {
    test(`theme, paired devices, pairing and revoking from Settings (${size})`, { timeout: 180000 }, async () => {
      const gw = await suite.gateway({ agent: 'none' });
      const { page } = await suite.device(viewport);
      await page.emulateMedia({ colorScheme: 'light' });
      // Where the theme stood when the body was first parsed: before the first paint.
      await page.addInitScript(() => {
        new MutationObserver((_, obs) => {
          if (!document.body) return;
          window.themeAtBody = document.documentElement.dataset.theme;
          obs.disconnect();
        }).observe(document, { childList: true, subtree: true });
      });
      await page.addInitScript(() => localStorage.setItem('iris.device_name', 'Laptop'));
      await openSignedIn(page, gw.url);
      assert.equal(await theme(page), 'light');

      // Opened from the menu by keyboard.
      await page.getByRole('button', { name: 'Menu', exact: true }).focus();
      await page.keyboard.press('Enter');
      await page.getByRole('menuitem', { name: 'Settings…' }).waitFor();
      await page.getByRole('menuitem', { name: 'Settings…' }).focus();
      await page.keyboard.press('Enter');
      let dialog = page.getByRole('dialog', { name: 'Settings' });
      await dialog.waitFor();
      assert.equal(await page.evaluate(() => document.activeElement.value), 'system', 'the theme in force has the focus');

      // Theme: applied at once, kept across a reload, in force before the body is parsed.
      await dialog.getByRole('radio', { name: 'Dark' }).check();
      assert.equal(await theme(page), 'dark');
      assert.equal(await background(page), DARK_BG);
      await page.reload();
      await waitOnline(page);
      assert.equal(await page.evaluate(() => window.themeAtBody), 'dark', 'dark before the first paint');
      assert.equal(await background(page), DARK_BG);
      dialog = await openSettings(page);
      assert.ok(await dialog.getByRole('radio', { name: 'Dark' }).isChecked());
      await dialog.getByRole('radio', { name: 'Light' }).check();
      assert.equal(await background(page), LIGHT_BG);
      await page.emulateMedia({ colorScheme: 'dark' });
      assert.equal(await background(page), LIGHT_BG, 'Light holds whatever the system says');
      await dialog.getByRole('radio', { name: 'System' }).check();
      assert.equal(await theme(page), 'dark', 'System follows the system');
      await page.emulateMedia({ colorScheme: 'light' });
      await page.waitForFunction(() => document.documentElement.dataset.theme === 'light');

      // The device list: only this one, marked.
      await rows(dialog).first().waitFor();
      assert.equal(await rows(dialog).count(), 1);
      const me = rows(dialog).filter({ hasText: 'This device' });
      assert.match(await me.textContent(), /Laptop/);
      await me.getByRole('button', { name: 'Revoke Laptop' }).waitFor();

      // Pair two devices through this one's code.
      let link = await pairingLink(page, dialog);
      const phone = await pairedBrowser(link, PHONE, 'Phone');
      await page.locator('dialog#ask').getByRole('button', { name: 'Done' }).click();
      await row(dialog, 'Phone').waitFor();
      link = await pairingLink(page, dialog);
      const tablet = await pairedBrowser(link, viewport, 'Tablet');
      await page.locator('dialog#ask').getByRole('button', { name: 'Done' }).click();
      const phoneRow = row(dialog, 'Phone');
      await row(dialog, 'Tablet').waitFor();
      assert.match(await phoneRow.textContent(), /paired by Laptop/);
      await shot(page, `settings-${size}`);

      // The phone sees itself marked, and no Revoke for the laptop that paired it.
      const phoneDialog = await openSettings(phone);
      await rows(phoneDialog).nth(2).waitFor();
      assert.match(await rows(phoneDialog).filter({ hasText: 'This device' }).textContent(), /Phone/);
      assert.equal(await row(phoneDialog, 'Laptop').getByRole('button').count(), 0);
      assert.equal(await row(phoneDialog, 'Tablet').getByRole('button').count(), 0);
      await shot(phone, `settings-phone-seen-from-a-paired-device-${size}`);

      // The laptop revokes the phone: it leaves the list, and the phone's page is signed out.
      await phoneRow.getByRole('button', { name: 'Revoke Phone' }).click();
      const confirm = page.locator('dialog#ask');
      await confirm.getByRole('heading', { name: 'Revoke Phone?' }).waitFor();
      await confirm.getByRole('button', { name: 'Revoke' }).click();
      await phoneRow.waitFor({ state: 'detached' });
      await dialog.getByRole('status').filter({ hasText: 'Phone was revoked.' }).waitFor();
      await phone.locator('#signin').waitFor();
      await phone.locator('#signin-error', { hasText: 'removed from the gateway' }).waitFor();

      // The tablet revokes itself; the laptop's list is stale, and its Revoke is refused with why.
      const tabletDialog = await openSettings(tablet);
      await rows(tabletDialog).nth(1).waitFor();
      assert.equal(await rows(tabletDialog).count(), 2, 'another device sees the phone gone when it asks');
      assert.equal(await row(tabletDialog, 'Phone').count(), 0);
      await tabletDialog.getByRole('button', { name: 'Revoke Tablet' }).click();
      await tablet.locator('dialog#ask').getByRole('button', { name: 'Revoke' }).click();
      await tablet.locator('#signin-error', { hasText: 'This browser was revoked' }).waitFor();
      assert.equal(await tablet.evaluate(() => localStorage.getItem('iris.token')), null, 'its token is forgotten');
      await row(dialog, 'Tablet').getByRole('button', { name: 'Revoke Tablet' }).click();
      await confirm.getByRole('button', { name: 'Revoke' }).click();
      await dialog.getByRole('status').filter({ hasText: /Not revoked: no paired device/ }).waitFor();
      await row(dialog, 'Tablet').waitFor({ state: 'detached' });
      assert.equal(await rows(dialog).count(), 1);

      // Esc closes the view and the menu still works.
      await page.keyboard.press('Escape');
      await dialog.waitFor({ state: 'hidden' });
      await openSettings(page);
      assert.deepEqual(pageErrors(page), []);
      assert.deepEqual(pageErrors(tablet), []);
    });
  }

  test('a revoked browser forgets the gateway, pairs again, and learns of a revocation made while it was away', { timeout: 120000 }, async () => {
    const gw = await suite.gateway();
    const { page } = await suite.device(DESKTOP);
    await openSignedIn(page, gw.url);
    const dialog = await openSettings(page);
    const done = () => page.locator('dialog#ask').getByRole('button', { name: 'Done' }).click();
    const phone = await pairedBrowser(await pairingLink(page, dialog), PHONE, 'Phone');
    await done();
    await send(phone, 'secret plan');
    await phone.locator('.msg.role-assistant', { hasText: 'Echo: secret plan' }).waitFor();
    const kept = () => phone.evaluate(() => ({
      token: localStorage.getItem('iris.token'),
      cursor: localStorage.getItem('iris.cursor'),
      lane: localStorage.getItem('iris.lane'),
      deviceId: localStorage.getItem('iris.device_id'),
      shown: document.body.innerText.includes('secret plan') || document.querySelectorAll('.msg').length > 0,
    }));
    const before = await kept();
    assert.match(before.token, /^idt_/);

    const revoke = async () => {
      await row(dialog, 'Phone').getByRole('button', { name: 'Revoke Phone' }).click();
      await page.locator('dialog#ask').getByRole('button', { name: 'Revoke' }).click();
      await dialog.getByRole('status').filter({ hasText: 'Phone was revoked.' }).waitFor();
    };
    const removed = async () => {
      await phone.locator('#signin-error', { hasText: 'This browser was removed from the gateway.' }).waitFor();
      const after = await kept();
      assert.deepEqual({ ...after, deviceId: null }, { token: null, cursor: null, lane: null, deviceId: null, shown: false });
      return after.deviceId;
    };
    // Revoked while connected: told at once.
    await revoke();
    const newId = await removed();
    assert.ok(newId && newId !== before.deviceId, 'a new device id');

    // Paired again with a new code: the same browser, a new device.
    await row(dialog, 'Phone').waitFor({ state: 'detached' });
    await phone.goto(await pairingLink(page, dialog));
    await waitOnline(phone);
    await done();
    await row(dialog, 'Phone').waitFor();
    assert.equal(await phone.evaluate(() => localStorage.getItem('iris.device_id')), newId);

    // Revoked while its page was closed (the tab shows a file of the gateway, no client): it
    // learns so when it comes back.
    await phone.goto(new URL('assets/icon.svg', gw.url).href);
    await revoke();
    await phone.goto(gw.url);
    await removed();
    assert.deepEqual(pageErrors(phone), []);
    assert.deepEqual(pageErrors(page), []);
  });
});
