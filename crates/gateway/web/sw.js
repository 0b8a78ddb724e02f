// Iris Web service worker: shows notifications pushed by the gateway while no Iris tab is open,
// and focuses (or opens) the client when one is clicked. It caches nothing: the client needs the
// gateway anyway, and the gateway serves the page with revalidating cache headers.

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
      tag: data.chat_id ? `iris-${data.chat_id}-${data.thread_id || ''}` : 'iris',
      renotify: true,
      icon: new URL('assets/icon.svg', self.registration.scope).href,
      data: { chat_id: data.chat_id || null, thread_id: data.thread_id || null, cursor: data.cursor || null },
    });
  })());
});

self.addEventListener('notificationclick', (event) => {
  event.notification.close();
  event.waitUntil((async () => {
    const windows = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
    if (windows.length) return windows[0].focus();
    return self.clients.openWindow(self.registration.scope);
  })());
});
