// Notifications: `notification` frames shown as toasts (and as system notifications while the
// page is hidden, if allowed), and Web Push, which delivers them while no Iris tab is connected.
// Replayed approval and question notifications wait until the replay ends
// (`releaseHeldNotifications`) and show only while their picker is still open, so that a device
// coming back never announces what was answered meanwhile.
// Push is on only after the user turns it on in the menu (`toggleNotifications`); each
// connection re-sends the subscription (`refreshWebPush`), so the gateway learns of a renewed
// one, and a subscription made with a replaced gateway key is made again.

import { app, laneOf, store } from './state.js';
import { toast } from './ui.js';
import { dropSubscription, ensureSubscription, subscriptionPayload, webPushAvailable } from './webpush.js';

/** Replayed approval and question notifications, until the replay ends. */
let held = [];

const PICKER_NOTES = new Set(['approval', 'clarify']);

export function onNotification(frame) {
  if (frame.replayed && PICKER_NOTES.has(frame.payload.kind)) {
    held.push(frame);
    return;
  }
  showNotification(frame);
}

/**
 * After the replay (`sync.done`): of the held approval and question notifications, those of a
 * lane whose pickers of that kind are still open, as many as are open there (the latest ones).
 */
export function releaseHeldNotifications() {
  const open = new Map();
  for (const entry of app.pickers.values()) {
    const key = `${entry.lane.key}|${entry.frame.type}`;
    open.set(key, (open.get(key) || 0) + 1);
  }
  const shown = [];
  for (const frame of held.reverse()) {
    const key = `${laneOf(frame).key}|picker.${frame.payload.kind}`;
    if (!open.get(key)) continue;
    open.set(key, open.get(key) - 1);
    shown.unshift(frame);
  }
  held = [];
  for (const frame of shown) showNotification(frame);
}

function showNotification(frame) {
  const p = frame.payload;
  // A long offline gap replays many notifications: show only the first few.
  if (frame.replayed && app.toastBudget-- <= 0) return;
  toast(p.body || '', 'note', p.title);
  if (document.hidden && 'Notification' in window && Notification.permission === 'granted') {
    try {
      new Notification(p.title || 'Iris', { body: p.body || '', tag: `iris-${frame.cursor}` });
    } catch {
      // Some browsers only allow notifications from a service worker.
    }
  }
}

export async function refreshWebPush() {
  if (store.getItem('iris.webpush') !== 'on' || !webPushAvailable(window, app.webpushKey)) return;
  try {
    if (Notification.permission !== 'granted') {
      // Revoked in the browser's settings: stop asking the gateway to push here.
      store.setItem('iris.webpush', 'off');
      await app.conn.request('fcm.register', { webpush: null });
      return;
    }
    const sub = await ensureSubscription(app.webpushKey);
    await app.conn.request('fcm.register', { webpush: subscriptionPayload(sub) });
  } catch (e) {
    console.warn('web push unavailable', e);
  }
}

export async function toggleNotifications() {
  if (!('Notification' in window)) {
    toast('This browser cannot show notifications.');
    return;
  }
  if (store.getItem('iris.webpush') === 'on') {
    store.setItem('iris.webpush', 'off');
    try {
      await dropSubscription();
      await app.conn.request('fcm.register', { webpush: null });
    } catch (e) {
      console.warn('web push', e);
    }
    toast('Notifications are off while Iris is closed.');
    return;
  }
  const permission = await Notification.requestPermission();
  if (permission !== 'granted') {
    toast('Notifications stay off.');
    return;
  }
  if (!webPushAvailable(window, app.webpushKey)) {
    toast('Notifications are on while Iris is open in a tab.');
    return;
  }
  try {
    const sub = await ensureSubscription(app.webpushKey);
    await app.conn.request('fcm.register', { webpush: subscriptionPayload(sub) });
    store.setItem('iris.webpush', 'on');
    toast('Notifications are on, also while Iris is closed.');
  } catch (e) {
    toast(`Notifications are on while Iris is open in a tab; push is unavailable here (${e.message || e}).`);
  }
}
