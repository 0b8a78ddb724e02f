// The Notifications dialog (menu › Notifications…), through the real gateway and a push service
// on 127.0.0.1: it says whether this browser shows notifications, which service pushes reach
// this device through and how the last push ended; turning notifications on there registers the
// browser's subscription, and "Send a test notification" pushes one to this device (decrypted
// here, as the browser would) and shows it delivered, at most once in 10 s. The service worker
// shows a test notification even while an Iris tab is visible (other pushes it leaves to the tab).
// A subscription the push service says is gone is shown as expired, with what to do.
//
// Headless Chromium cannot subscribe to a push service of its own choosing, so the page's
// PushManager hands out a subscription to the loopback push service (made in node, whose keys
// decrypt what the gateway sends); everything else — permission, service worker, fcm.register,
// push.status, push.test — is the app's and the gateway's own.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { FakePushService, Subscriber, nodeDevice, subscribeAndLeave, waitConnections } from './fakepush.mjs';
import { DESKTOP, PHONE, browserSuite, openSignedIn, pageErrors, send, shot, waitOnline } from './harness.mjs';

const suite = browserSuite(before, after);

const CONFIG = `
[push]
coalesce_ms = 300

[push.webpush]
allow_private_endpoints = true
`;

/** In the page: a PushManager whose subscription is `sub` (`{endpoint, p256dh, auth}`). */
function stubPushManager(sub) {
  if (typeof PushManager === 'undefined') return;
  let current = null;
  PushManager.prototype.getSubscription = async function getSubscription() {
    return current;
  };
  PushManager.prototype.subscribe = async function subscribe(options) {
    const key = new Uint8Array(options.applicationServerKey).buffer;
    current = {
      endpoint: sub.endpoint,
      expirationTime: null,
      options: { applicationServerKey: key, userVisibleOnly: true },
      toJSON: () => ({ endpoint: sub.endpoint, expirationTime: null, keys: { p256dh: sub.p256dh, auth: sub.auth } }),
      unsubscribe: async () => {
        current = null;
        return true;
      },
    };
    return current;
  };
}

/**
 * Push delivery to the page's service worker through the DevTools protocol, as the browser's
 * push service would, and the notifications it shows.
 */
async function serviceWorkerPush(context, page, origin) {
  const cdp = await context.newCDPSession(page);
  let found;
  const registered = new Promise((resolve) => { found = resolve; });
  cdp.on('ServiceWorker.workerRegistrationUpdated', ({ registrations }) => {
    const mine = registrations.find((r) => !r.isDeleted && new URL(r.scopeURL).origin === origin);
    if (mine) found(mine.registrationId);
  });
  await cdp.send('ServiceWorker.enable');
  return {
    deliver: async (payload) => {
      const registrationId = await Promise.race([registered, new Promise((_, reject) => setTimeout(() => reject(new Error('no service worker')), 15000).unref())]);
      await cdp.send('ServiceWorker.deliverPushMessage', { origin, registrationId, data: JSON.stringify(payload) });
    },
    /** The titles of the notifications shown, once `pred` holds for them. */
    waitTitles: async (pred) => {
      const deadline = Date.now() + 15000;
      for (;;) {
        const titles = await page.evaluate(async () => (await (await navigator.serviceWorker.ready).getNotifications()).map((n) => n.title));
        if (pred(titles)) return titles;
        if (Date.now() > deadline) throw new Error(`notifications shown: ${JSON.stringify(titles)}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
}

/** Opens menu › Notifications…; returns the dialog. */
async function openNotifications(page) {
  await page.getByRole('button', { name: 'Menu' }).click();
  await page.getByRole('menuitem', { name: 'Notifications…' }).click();
  const dialog = page.getByRole('dialog', { name: 'Notifications' });
  await dialog.waitFor();
  return dialog;
}

/** Closes the dialog with Esc; the focus goes back to the menu button. */
async function closeWithEscape(page, dialog) {
  await page.keyboard.press('Escape');
  await dialog.waitFor({ state: 'hidden' });
  await page.waitForFunction(() => document.activeElement && document.activeElement.id === 'open-menu', null, { timeout: 5000 });
}

describe('the Notifications dialog', { timeout: 240000 }, () => {
  for (const [size, viewport] of [['phone', PHONE], ['desktop', DESKTOP]]) {
    test(`at ${size} size: turning notifications on shows the route, and a test notification reaches this device once`, { timeout: 90000 }, async () => {
      const fake = await new FakePushService().listen();
      suite.cleanups.push(() => fake.close());
      const gw = await suite.gateway({ config: CONFIG });
      const origin = new URL(gw.url).origin;
      const browserSub = new Subscriber(`${fake.base}${size}`);

      const { context, page } = await suite.device(viewport);
      await context.grantPermissions(['notifications'], { origin });
      await context.addInitScript(stubPushManager, browserSub.subscription());
      const worker = await serviceWorkerPush(context, page, origin);
      await openSignedIn(page, gw.url);

      // Nothing reaches this device yet, and there is nothing to test.
      const dialog = await openNotifications(page);
      const route = dialog.locator('.push-route');
      const testButton = dialog.getByRole('button', { name: 'Send a test notification' });
      await dialog.locator('.push-browser', { hasText: 'Only while Iris is open in a tab: push is off.' }).waitFor();
      await route.filter({ hasText: "None: notifications can't reach this device." }).waitFor();
      await dialog.getByText('No notifications sent to this device yet.').waitFor();
      assert.equal(await testButton.isDisabled(), true, 'no test without a route');

      // Turned on in the dialog: the browser's subscription is registered and pushes take Web Push.
      await dialog.getByRole('button', { name: 'Turn on notifications' }).click();
      await route.filter({ hasText: 'Web Push (this browser)' }).waitFor();
      await dialog.locator('.push-browser', { hasText: 'On: this browser shows notifications' }).waitFor();
      await dialog.getByRole('button', { name: 'Turn off notifications' }).waitFor();
      await dialog.getByText('No notifications sent to this device yet.').waitFor();
      assert.equal(await testButton.isDisabled(), false);
      await shot(page, `pushsettings-${size}-on`);

      // A test: the button waits (disabled) while the push service takes its time.
      const release = fake.hold(size);
      await testButton.click();
      const decode = (push) => (push.id === size ? browserSub.decrypt(push.body) : undefined);
      const payload = await fake.waitFor(decode, () => true);
      const sending = dialog.getByRole('button', { name: 'Sending…' });
      await sending.waitFor();
      assert.equal(await sending.isDisabled(), true, 'disabled while waiting');
      release();
      assert.equal(payload.type, 'push.test');
      assert.equal(payload.title, 'Test notification');
      assert.equal(payload.body, 'Notifications from Iris reach this device.');
      const outcome = dialog.locator('.push-outcome').first();
      await outcome.filter({ hasText: 'Delivered just now' }).waitFor();
      assert.equal(await outcome.locator('.push-backend').textContent(), 'Web Push (this browser)');
      assert.equal(await outcome.locator('.push-test').textContent(), 'Test', 'marked as a test');
      await dialog.getByRole('status').filter({ hasText: 'Test notification sent.' }).waitFor();
      assert.equal(await testButton.isDisabled(), false);
      await shot(page, `pushsettings-${size}-delivered`);

      // At once again: refused by the gateway, and nothing more is pushed.
      await testButton.click();
      await dialog.getByRole('status').filter({ hasText: 'Wait a few seconds before another test.' }).waitFor();
      assert.equal(fake.pushesTo(size).length, 1, 'one push only');
      await testButton.filter({ hasText: 'Send a test notification' }).waitFor();
      assert.equal(await testButton.isDisabled(), false);

      // The service worker shows the test although this tab is visible; an ordinary push it
      // leaves to the tab. (Push events are handled in order: the second test marks the end.)
      assert.equal(await page.evaluate(() => document.visibilityState), 'visible');
      await worker.deliver(payload);
      await worker.waitTitles((titles) => titles.includes('Test notification'));
      await worker.deliver({ title: 'Demo replied in General', body: 'hi', type: 'message.stop', chat_id: 'default', cursor: 5 });
      await worker.deliver({ ...payload, title: 'Test notification again', tag: 'iris-test-2' });
      const shown = await worker.waitTitles((titles) => titles.includes('Test notification') && titles.includes('Test notification again'));
      assert.deepEqual(shown.sort(), ['Test notification', 'Test notification again'], 'the ordinary push is not shown');

      await closeWithEscape(page, dialog);
      assert.deepEqual(pageErrors(page), []);
    });
  }

  test('a subscription the push service says is gone shows as expired, with what to do', { timeout: 90000 }, async () => {
    const fake = await new FakePushService().listen();
    suite.cleanups.push(() => fake.close());
    const gw = await suite.gateway({ config: CONFIG });

    // The phone signed in once; its browser's subscription (registered with the phone's own
    // device id and token) is one the push service will say is gone.
    const phone = await suite.device(PHONE);
    await openSignedIn(phone.page, gw.url);
    const creds = await phone.page.evaluate(() => ({ deviceId: localStorage.getItem('iris.device_id'), token: localStorage.getItem('iris.token') }));
    assert.ok(creds.deviceId && creds.token);
    await phone.page.goto('about:blank');
    await waitConnections(gw.url, 0);
    const gone = new Subscriber(`${fake.base}gone`);
    fake.answer.set('gone', 410);
    await subscribeAndLeave(gw.url, creds.deviceId, gone.subscription(), creds.token);
    await waitConnections(gw.url, 0);

    // An answer on the desktop is pushed to the phone, and the push service answers 410.
    const desktop = await suite.device(DESKTOP);
    await openSignedIn(desktop.page, gw.url);
    await send(desktop.page, 'hello there');
    const pushed = await fake.waitFor((p) => (p.id === 'gone' ? gone.decrypt(p.body) : undefined), () => true);
    assert.notEqual(pushed.type, 'push.test');

    // The gateway records the outcome after removing the subscription: wait until it says so.
    const probe = await nodeDevice(gw.url, { deviceId: creds.deviceId, token: creds.token });
    try {
      const deadline = Date.now() + 15000;
      for (;;) {
        const status = (await probe.request('push.status', {})).payload;
        if (status.last.some((o) => o.result === 'expired')) {
          assert.ok(!status.route, 'no route is left');
          break;
        }
        if (Date.now() > deadline) throw new Error(`no expired outcome: ${JSON.stringify(status)}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    } finally {
      await probe.close();
    }
    await waitConnections(gw.url, 1);

    // The phone opens Iris again: its dialog says the subscription was removed.
    await phone.page.goto(gw.url);
    await waitOnline(phone.page);
    const dialog = await openNotifications(phone.page);
    const outcome = dialog.locator('.push-outcome.push-expired');
    await outcome.waitFor();
    assert.equal(await outcome.locator('.push-backend').textContent(), 'Web Push (this browser)');
    assert.equal(await outcome.locator('.push-result').textContent(),
      "Expired just now — this browser's subscription was removed. Turn notifications on again.");
    assert.equal(await outcome.locator('.push-test').count(), 0, 'not a test');
    await dialog.locator('.push-route', { hasText: "None: notifications can't reach this device." }).waitFor();
    assert.equal(await dialog.getByRole('button', { name: 'Send a test notification' }).isDisabled(), true);
    await dialog.locator('.push-browser', { hasText: 'Off: nothing shows while Iris is closed.' }).waitFor();
    await dialog.getByRole('button', { name: 'Turn on notifications' }).waitFor();
    await shot(phone.page, 'pushsettings-phone-expired');
    await closeWithEscape(phone.page, dialog);
    assert.deepEqual(pageErrors(phone.page), []);
    assert.deepEqual(pageErrors(desktop.page), []);
  });
});
