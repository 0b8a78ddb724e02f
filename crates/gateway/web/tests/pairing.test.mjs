// Pairing in the browser: a signed-in page makes a one-time pairing code ("Pair another
// device"), another browser opens its link and ends up with a device token of its own, and
// nothing reusable is left in its address bar or history.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  PHONE, browserSuite, openSignedIn, shot, waitOnline,
} from './harness.mjs';

const suite = browserSuite(before, after);

const device = suite.device;

describe('Pairing', { timeout: 120000 }, () => {
  test('a pairing link from another device signs in once and leaves a device token, not the code', { timeout: 90000 }, async () => {
    const gw = await suite.gateway({ agent: 'none' });

    const { page: laptop } = await device();
    await openSignedIn(laptop, gw.url);
    await laptop.getByRole('button', { name: 'Menu' }).click();
    await laptop.getByRole('menuitem', { name: 'Pair another device' }).click();
    const dialog = laptop.locator('#ask');
    await dialog.getByRole('heading', { name: 'Pair another device' }).waitFor();
    await dialog.getByRole('img', { name: 'Pairing QR code' }).waitFor();
    const qrLoaded = await dialog.locator('img.pair-qr').evaluate((img) => img.complete && img.naturalWidth > 0);
    assert.ok(qrLoaded, 'the QR code is drawn');
    assert.match(await dialog.textContent(), /works once, within 10 minutes/);
    const link = await dialog.getByRole('textbox', { name: 'Pairing link' }).inputValue();
    const code = new URLSearchParams(new URL(link).hash.slice(1)).get('token');
    assert.match(code, /^ipc_[0-9a-f]{64}$/);
    assert.equal(new URL(link).origin, new URL(gw.url).origin);
    await shot(laptop, 'pair-another-device');
    await dialog.getByRole('button', { name: 'Done' }).click();

    const { page: phone } = await device(PHONE);
    await phone.goto(link);
    await waitOnline(phone);
    assert.ok(!phone.url().includes(code), 'the code is gone from the address bar');
    const token = await phone.evaluate(() => localStorage.getItem('iris.token'));
    assert.match(token, /^idt_[0-9a-f]{64}$/, 'the device keeps its own token');
    const kept = await phone.evaluate(() => JSON.stringify({ ...localStorage }));
    assert.ok(!kept.includes(code), 'the spent code is not kept');
    // Nothing reusable in the history: the entry that held the code was replaced.
    await phone.goBack();
    assert.ok(!phone.url().includes(code), `back leads to ${phone.url()}`);
    await phone.goto(gw.url);
    await waitOnline(phone);

    // The same link again, in a third browser: the code is spent.
    const { page: stranger } = await device(PHONE);
    await stranger.goto(link);
    await stranger.locator('#signin-error', { hasText: 'pairing code already used' }).waitFor();
    assert.equal(new URL(stranger.url()).hash, '');
    assert.equal(await stranger.evaluate(() => localStorage.getItem('iris.token')), null, 'the dead code is forgotten');
  });

  test('a page that sends this tab to a made-up token does not take its device token away', { timeout: 90000 }, async () => {
    const gw = await suite.gateway({ agent: 'none' });
    const { page: laptop } = await device();
    await openSignedIn(laptop, gw.url);
    await laptop.getByRole('button', { name: 'Menu' }).click();
    await laptop.getByRole('menuitem', { name: 'Pair another device' }).click();
    const dialog = laptop.locator('#ask');
    const link = await dialog.getByRole('textbox', { name: 'Pairing link' }).inputValue();

    const { page: phone } = await device(PHONE);
    await phone.goto(link);
    await waitOnline(phone);
    const token = await phone.evaluate(() => localStorage.getItem('iris.token'));
    const id = await phone.evaluate(() => localStorage.getItem('iris.device_id'));
    assert.match(token, /^idt_/);

    // A foreign page navigates the paired tab to the gateway with a token of its own.
    await phone.goto(`${gw.url}#token=junk`);
    await waitOnline(phone);
    assert.equal(await phone.evaluate(() => localStorage.getItem('iris.token')), token, 'the device token is kept');
    assert.equal(await phone.evaluate(() => localStorage.getItem('iris.device_id')), id);
    assert.equal(await phone.evaluate(() => localStorage.getItem('iris.kept')), null);
    assert.equal(new URL(phone.url()).hash, '');
  });
});
