// Web Push for Iris Web: once the user turns notifications on, this browser subscribes with the
// gateway's VAPID key (hello.ack server_caps.webpush_key) and the subscription is sent to the
// gateway with fcm.register {webpush}. sw.js shows what the gateway pushes while no Iris tab is
// connected. Nothing here runs on import, and nothing asks for permission by itself.

/** The bytes of a base64url string (padding and the standard alphabet are tolerated). */
export function base64UrlToBytes(text) {
  const b64 = String(text).trim().replace(/=+$/, '').replace(/-/g, '+').replace(/_/g, '/');
  const bin = atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

/** The `webpush` object of fcm.register: `PushSubscription.toJSON()` flattened. */
export function subscriptionPayload(sub) {
  const json = typeof sub.toJSON === 'function' ? sub.toJSON() : sub;
  const keys = json.keys || {};
  return { endpoint: json.endpoint, p256dh: keys.p256dh, auth: keys.auth };
}

/**
 * Whether this page can receive Web Push from this gateway: a secure context (https, or
 * localhost), a browser with service workers and push, and a gateway that offers a key.
 */
export function webPushAvailable(win, key) {
  return Boolean(key) && Boolean(win.isSecureContext) && 'serviceWorker' in win.navigator
    && 'PushManager' in win && 'Notification' in win;
}

function sameKey(buffer, bytes) {
  if (!buffer) return false;
  const a = new Uint8Array(buffer);
  return a.length === bytes.length && a.every((b, i) => b === bytes[i]);
}

/**
 * This browser's subscription for the gateway's key. A subscription made with another key (the
 * gateway's key was replaced) is dropped and made again; subscribing needs the notification
 * permission already granted, so it never prompts.
 */
export async function ensureSubscription(key) {
  await navigator.serviceWorker.register('sw.js');
  const reg = await navigator.serviceWorker.ready;
  const want = base64UrlToBytes(key);
  let sub = await reg.pushManager.getSubscription();
  if (sub && !sameKey(sub.options && sub.options.applicationServerKey, want)) {
    await sub.unsubscribe();
    sub = null;
  }
  return sub || reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: want });
}

/** This browser's subscription, if it has one (never subscribes). */
export async function currentSubscription() {
  if (!('serviceWorker' in navigator) || !('PushManager' in window)) return null;
  try {
    const reg = await navigator.serviceWorker.getRegistration();
    return (reg && await reg.pushManager.getSubscription()) || null;
  } catch {
    return null;
  }
}

/** Ends this browser's subscription, if it has one. */
export async function dropSubscription() {
  if (!('serviceWorker' in navigator)) return;
  const reg = await navigator.serviceWorker.getRegistration();
  const sub = reg && await reg.pushManager.getSubscription();
  if (sub) await sub.unsubscribe();
}
