// The app shell offline: once Iris Web has been opened, its service worker keeps the page and
// the assets of its first paint, so a reload with the gateway out of reach shows the client,
// saying it is offline, instead of the browser's error page; and it comes back online by itself
// when the gateway is reachable again.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { PHONE, Proxy, TOKEN, browserSuite, pageErrors, shot, waitOnline } from './harness.mjs';

const suite = browserSuite(before, after);

describe('Offline app shell', { timeout: 120000 }, () => {
  test('a reload without the gateway shows the client offline, then it reconnects', { timeout: 90000 }, async () => {
    const gw = await suite.gateway();
    const proxy = await new Proxy(gw.port).listen();
    suite.cleanups.push(() => proxy.close());
    const { page } = await suite.device(PHONE);

    await page.goto(`${proxy.url}#token=${encodeURIComponent(TOKEN)}`);
    await waitOnline(page);
    // The service worker has kept the shell and controls the page.
    await page.waitForFunction(() => navigator.serviceWorker.controller !== null, null, { timeout: 20000 });

    proxy.cut();
    await page.reload();
    await page.waitForFunction(() => document.body.dataset.conn === 'offline', null, { timeout: 20000 });
    // The offline banner says so (on a phone the chat list, with its state line, is closed).
    await page.locator('#banner.offline').waitFor();
    assert.equal(await page.locator('#conn-state').textContent(), 'Offline');
    assert.equal(await page.locator('#app').isVisible(), true, 'the client itself is shown');
    assert.equal(await page.getByRole('textbox', { name: 'Message' }).isVisible(), true);
    assert.match(await page.title(), /Iris/);
    await shot(page, 'offline-shell-phone');

    proxy.restore();
    await waitOnline(page);
    assert.deepEqual(pageErrors(page), []);
  });
});
