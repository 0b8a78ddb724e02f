// Notifications: `notification` frames shown as toasts (and as system notifications while the
// page is hidden, if allowed), and Web Push, which delivers them while no Iris tab is connected.
// An approval or a question is not toasted while its own dialog shows it.
// Replayed approval and question notifications wait until the replay ends
// (`releaseHeldNotifications`) and show only while their picker is still open, so that a device
// coming back never announces what was answered meanwhile.
// Push is on only after the user turns it on in the Notifications dialog (`toggleNotifications`,
// notifysettings.js); each connection re-sends the subscription (`refreshWebPush`), so the
// gateway learns of a renewed one, and a subscription made with a replaced gateway key is made
// again.

import { app, laneOf, store } from './state.js';
import { toast } from './ui.js';
import { currentSubscription, dropSubscription, ensureSubscription, subscriptionPayload, webPushAvailable } from './webpush.js';

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
  // An approval or a question whose own dialog is open needs no toast over it (pickers.js also
  // takes such a toast away when the dialog opens after it).
  const lane = laneOf(frame).key;
  const picker = PICKER_NOTES.has(p.kind);
  const shown = app.pickerShown && app.pickers.get(app.pickerShown);
  if (picker && shown && shown.lane.key === lane && !document.hidden) return;
  const el = toast(p.body || '', 'note', p.title);
  if (picker) el.dataset.pickerLane = lane;
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

/**
 * Turns notifications on or off in this browser: asks for the permission, subscribes to Web Push
 * and tells the gateway (or ends the subscription). Resolves with a sentence saying how it went.
 */
export async function toggleNotifications() {
  if (!('Notification' in window)) return 'This browser cannot show notifications.';
  if (store.getItem('iris.webpush') === 'on') {
    store.setItem('iris.webpush', 'off');
    try {
      await dropSubscription();
      await app.conn.request('fcm.register', { webpush: null });
    } catch (e) {
      console.warn('web push', e);
    }
    return 'Notifications are off while Iris is closed.';
  }
  const permission = await Notification.requestPermission();
  if (permission !== 'granted') return 'Notifications stay off.';
  if (!webPushAvailable(window, app.webpushKey)) return 'Notifications are on while Iris is open in a tab.';
  try {
    const sub = await ensureSubscription(app.webpushKey);
    await app.conn.request('fcm.register', { webpush: subscriptionPayload(sub) });
    store.setItem('iris.webpush', 'on');
    return 'Notifications are on, also while Iris is closed.';
  } catch (e) {
    return `Notifications are on while Iris is open in a tab; push is unavailable here (${e.message || e}).`;
  }
}

/**
 * Whether this browser shows notifications: `{on, text}`, `on` when push is on here (the user
 * turned it on, the permission stands and the browser has a subscription).
 */
export async function browserNotifications() {
  if (!('Notification' in window)) return { on: false, text: "This browser can't show notifications." };
  if (Notification.permission === 'denied') return { on: false, text: "Blocked in this browser's site settings." };
  const wanted = store.getItem('iris.webpush') === 'on';
  if (wanted && Notification.permission === 'granted' && await currentSubscription()) {
    return { on: true, text: 'On: this browser shows notifications, also while Iris is closed.' };
  }
  if (wanted && Notification.permission === 'granted') return { on: true, text: 'On, but this browser has no push subscription yet: it is made again when Iris connects.' };
  if (Notification.permission === 'granted') return { on: false, text: 'Only while Iris is open in a tab: push is off.' };
  return { on: false, text: 'Off: nothing shows while Iris is closed.' };
}
