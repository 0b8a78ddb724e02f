// Iris Web service worker: shows the notifications the gateway pushes (Web Push, docs/protocol.md
// §10) while no Iris tab is connected, and focuses (or opens) the client at the pushed chat when
// one is clicked. It caches nothing: the client needs the gateway anyway, and the gateway serves
// the page with revalidating cache headers.

self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (event) => event.waitUntil(self.clients.claim()));

self.addEventListener('push', (event) => {
  let data = {};
  try {
    data = event.data ? event.data.json() : {};
  } catch {
    data = { title: 'Iris', body: event.data ? event.data.text() : '' };
  }
  event.waitUntil((async () => {
    const windows = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
    // A visible tab shows the frame itself; a system notification would be a duplicate.
    if (windows.some((w) => w.visibilityState === 'visible')) return;
    await self.registration.showNotification(data.title || 'Iris', {
      body: data.body || '',
      // One notification per chat: a newer push (or a resend of the same) replaces it.
      tag: data.tag || (data.chat_id ? `iris-${data.chat_id}-${data.thread_id || ''}` : 'iris'),
      renotify: true,
      icon: new URL('assets/icon.svg', self.registration.scope).href,
      data: { chat_id: data.chat_id || null, thread_id: data.thread_id || null, cursor: data.cursor || null },
    });
  })());
});

self.addEventListener('notificationclick', (event) => {
  event.notification.close();
  const { chat_id: chatId, thread_id: threadId } = event.notification.data || {};
  event.waitUntil((async () => {
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
  })());
});
