// Iris Web service worker: keeps the app shell for offline loads, shows the notifications the
// gateway pushes (Web Push, docs/protocol.md §10) while no Iris tab is visible (a test
// notification at any time), and focuses (or opens) the client at the pushed chat when one is
// clicked.
//
// Notifications with buttons: a push about an approval or a short question carries its choices
// and a one-time token. A button answers the question through `POST /v1/actions` without opening
// Iris; when that fails (already answered, expired, or the gateway out of reach) a notification
// says so, and clicking it opens the chat.
//
// The shell: the page is fetched from the network first (so a new gateway version is picked up
// at once) and kept; without a network the kept page is served, and the client shows itself
// offline instead of the browser's error page. Assets have content-hashed names that never
// change meaning, so they are served from the cache first; installing caches what the page needs
// for its first paint (its stylesheet, icon and preloaded modules), and a fresh page drops the
// cached assets it no longer names. Nothing else (media, the WebSocket) passes through here.

const SHELL = 'iris-shell-v1';
const HASHED = /\/assets\/.+\.[0-9a-f]{16}\.[a-z]+$/;
const PAGE = new URL('./', self.registration.scope).href;

/** The hashed asset URLs `html` names, and those it needs for the first paint. */
function named(html) {
  const all = new Set();
  const first = new Set();
  for (const m of html.matchAll(/"(\.?\/?assets\/[^"]+\.[0-9a-f]{16}\.[a-z]+)"/g)) all.add(new URL(m[1], PAGE).href);
  for (const m of html.matchAll(/<link [^>]*href="(assets\/[^"]+)"|<script [^>]*src="(assets\/[^"]+)"/g)) {
    first.add(new URL(m[1] || m[2], PAGE).href);
  }
  return { all, first };
}

/** Keeps `response` (a fresh page) and drops cached assets it no longer names. */
async function keepPage(response) {
  const cache = await caches.open(SHELL);
  const html = await response.clone().text();
  await cache.put(PAGE, response);
  const { all } = named(html);
  for (const req of await cache.keys()) {
    if (HASHED.test(new URL(req.url).pathname) && !all.has(req.url)) await cache.delete(req);
  }
  return html;
}

self.addEventListener('install', (event) => {
  event.waitUntil((async () => {
    const response = await fetch(PAGE, { cache: 'no-cache' });
    if (response.ok) {
      const html = await keepPage(response);
      await (await caches.open(SHELL)).addAll([...named(html).first]);
    }
    await self.skipWaiting();
  })());
});

self.addEventListener('activate', (event) => event.waitUntil((async () => {
  for (const name of await caches.keys()) if (name !== SHELL) await caches.delete(name);
  await self.clients.claim();
})()));

self.addEventListener('fetch', (event) => {
  const req = event.request;
  if (req.method !== 'GET') return;
  const url = new URL(req.url);
  if (url.origin !== self.location.origin) return;
  // A frame's navigation (the diagram frame) is not the page.
  if ((req.mode === 'navigate' && req.destination !== 'iframe') || url.href === PAGE || url.pathname.endsWith('/index.html')) {
    event.respondWith(pageFirstFromNetwork(req));
  } else if (HASHED.test(url.pathname)) {
    event.respondWith(assetFromCache(req));
  }
});

/** The page from the network (kept for later), else the kept one. */
async function pageFirstFromNetwork(req) {
  try {
    const response = await fetch(req);
    if (response.ok && new URL(req.url).pathname === new URL(PAGE).pathname) keepPage(response.clone()).catch(() => {});
    return response;
  } catch (err) {
    const kept = await caches.match(PAGE, { ignoreVary: true });
    if (kept) return kept;
    throw err;
  }
}

/** A hashed asset from the cache, else from the network (and kept). */
async function assetFromCache(req) {
  const cache = await caches.open(SHELL);
  const hit = await cache.match(req.url, { ignoreVary: true });
  if (hit) return hit;
  const response = await fetch(req);
  if (response.ok) cache.put(req.url, response.clone()).catch(() => {});
  return response;
}

/** The icon of every notification. */
const ICON = new URL('assets/icon.svg', self.registration.scope).href;

/** The tag of a lane's notification when the push names none. */
function laneTag(chatId, threadId) {
  return chatId ? `iris-${chatId}-${threadId || ''}` : 'iris';
}

/** How many buttons a notification can show here (the platform's own limit, else 2). */
function maxActions() {
  const n = typeof Notification !== 'undefined' ? Number(Notification.maxActions) : NaN;
  return Number.isFinite(n) && n > 0 ? n : 2;
}

self.addEventListener('push', (event) => {
  let data = {};
  try {
    data = event.data ? event.data.json() : {};
  } catch {
    data = { title: 'Iris', body: event.data ? event.data.text() : '' };
  }
  event.waitUntil((async () => {
    const windows = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
    // A visible tab shows the frame itself; a system notification would be a duplicate. A test
    // notification (`push.test`) has no frame: it always shows.
    if (data.type !== 'push.test' && windows.some((w) => w.visibilityState === 'visible')) return;
    const buttons = Array.isArray(data.actions) && data.actions.length && data.action_token
      ? data.actions.slice(0, maxActions()).map((a) => ({ action: String(a.action), title: String(a.title) }))
      : [];
    // One notification per chat: a newer push (or a resend of the same) replaces it.
    const tag = data.tag || laneTag(data.chat_id, data.thread_id);
    const options = {
      body: data.body || '',
      tag,
      renotify: true,
      icon: ICON,
      data: { chat_id: data.chat_id || null, thread_id: data.thread_id || null, cursor: data.cursor || null, tag },
    };
    if (buttons.length) {
      options.actions = buttons;
      // A question waits for an answer: it stays until it is answered or dismissed.
      options.requireInteraction = true;
      options.data.picker_id = data.picker_id || null;
      options.data.action_token = data.action_token;
    }
    await self.registration.showNotification(data.title || 'Iris', options);
  })());
});

/**
 * Answers the picker of a notification (its `data`, as the push handler stored it) with `value`,
 * one of its buttons, through `POST /v1/actions` of this gateway. Returns `{ok, status}`
 * (`status` 0 when the gateway could not be reached). When the answer is not taken, the
 * notification is replaced by one that says so; clicking that one opens the chat.
 */
async function answerFromNotification(data, value) {
  const token = data && data.action_token;
  let status = 0;
  if (token && value) {
    try {
      const response = await fetch(new URL('v1/actions', self.registration.scope).href, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ token, value }),
        credentials: 'omit',
        cache: 'no-store',
      });
      status = response.status;
    } catch {
      status = 0;
    }
  }
  const ok = status >= 200 && status < 300;
  if (!ok) {
    const chatId = (data && data.chat_id) || null;
    const threadId = (data && data.thread_id) || null;
    await self.registration.showNotification('Not answered', {
      body: 'Already answered, expired, or the gateway could not be reached. Open Iris to see it.',
      // It replaces the question's own notification.
      tag: (data && data.tag) || laneTag(chatId, threadId),
      renotify: true,
      icon: ICON,
      data: { chat_id: chatId, thread_id: threadId, cursor: (data && data.cursor) || null },
    });
  }
  return { ok, status };
}

/** Focuses an open Iris tab at the chat, or opens one there. */
async function openChat(chatId, threadId) {
  const windows = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
  if (windows.length) {
    const win = windows.find((w) => w.focused) || windows[0];
    // The open tab switches to the chat itself (app.js listens for this message).
    if (chatId) win.postMessage({ type: 'iris.open', chat_id: chatId, thread_id: threadId || null });
    return win.focus();
  }
  const url = new URL(self.registration.scope);
  if (chatId) url.hash = new URLSearchParams(threadId ? { chat_id: chatId, thread_id: threadId } : { chat_id: chatId }).toString();
  return self.clients.openWindow(url.href);
}

self.addEventListener('notificationclick', (event) => {
  event.notification.close();
  const data = event.notification.data || {};
  if (event.action && data.action_token) {
    // A button: answered in the background; a failure shows its own notification instead.
    event.waitUntil(answerFromNotification(data, event.action));
    return;
  }
  event.waitUntil(openChat(data.chat_id, data.thread_id));
});
