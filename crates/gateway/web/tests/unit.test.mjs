// Unit tests of the page's pure modules (the vendored SHA-256, command matching, the Web Push
// subscription the gateway is sent, what the Notifications dialog says of push outcomes, the
// export's harmless Markdown). The
// behaviour a person sees is covered end to end in e2e.test.mjs.

import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { test } from 'node:test';

import { splitRows } from '../assets/changes.js';
import { applyUpdate } from '../assets/conn.js';
import { harmless } from '../assets/harmless.js';
import { sha256 } from '../assets/vendor/noble-hashes/sha2.js';
import { bytesToHex } from '../assets/vendor/noble-hashes/utils.js';
import { ago, outcomeText, routeText } from '../assets/pushstatus.js';
import { fuzzyScore, matchCommands, runtimeFooter, snippetParts } from '../assets/util.js';
import { base64UrlToBytes, subscriptionPayload, webPushAvailable } from '../assets/webpush.js';

test('the vendored incremental sha256 matches node for any chunking', () => {
  assert.equal(bytesToHex(sha256.create().update(new TextEncoder().encode('abc')).digest()), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  assert.equal(bytesToHex(sha256.create().digest()), createHash('sha256').update('').digest('hex'));
  for (const size of [55, 56, 63, 64, 65, 1000, 300001]) {
    const data = randomBytes(size);
    const h = sha256.create();
    for (let i = 0; i < size; i += 777) h.update(data.subarray(i, i + 777));
    assert.equal(bytesToHex(h.digest()), createHash('sha256').update(data).digest('hex'), `size ${size}`);
  }
});

test('commands match by prefix, then substring, then letters in order', () => {
  const catalog = [
    { name: '/status', aliases: [] }, { name: '/stop', aliases: [] }, { name: '/new', aliases: ['/reset'] }, { name: '/model', aliases: [] },
  ];
  assert.deepEqual(matchCommands(catalog, '/st').map((c) => c.name), ['/stop', '/status']);
  assert.deepEqual(matchCommands(catalog, '/sts').map((c) => c.name), ['/status']);
  assert.deepEqual(matchCommands(catalog, '/res').map((c) => c.name), ['/new']);
  assert.equal(fuzzyScore('/zz', '/model'), 0);
  assert.equal(matchCommands(catalog, '/').length, 4);
});

test('snippets and runtime footers', () => {
  assert.deepEqual(snippetParts('…the [needle] and [more]'), [
    { text: '…the ', mark: false }, { text: 'needle', mark: true }, { text: ' and ', mark: false }, { text: 'more', mark: true },
  ]);
  assert.equal(runtimeFooter({ model: 'gpt-5', context_pct: 38, latency: 22.5, cost: 0.0012, cwd: '~' }), 'gpt-5 · 38% ctx · 22.5 s · $0.0012 · ~');
});

test('a push subscription is sent flat, and the gateway key is read as bytes', () => {
  // What PushSubscription.toJSON() returns in browsers.
  const subscription = {
    toJSON: () => ({
      endpoint: 'https://push.example.com/wpush/v2/abc',
      expirationTime: null,
      keys: { p256dh: 'BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM', auth: 'tBHItJI5svbpez7KI4CCXg' },
    }),
  };
  assert.deepEqual(subscriptionPayload(subscription), {
    endpoint: 'https://push.example.com/wpush/v2/abc',
    p256dh: 'BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM',
    auth: 'tBHItJI5svbpez7KI4CCXg',
  });
  const key = randomBytes(65);
  const text = key.toString('base64url');
  assert.deepEqual(Buffer.from(base64UrlToBytes(text)), key);
  assert.deepEqual(Buffer.from(base64UrlToBytes(key.toString('base64'))), key, 'padding and + / are tolerated');
  const secure = { isSecureContext: true, navigator: { serviceWorker: {} }, PushManager() {}, Notification() {} };
  assert.equal(webPushAvailable(secure, text), true);
  assert.equal(webPushAvailable(secure, null), false, 'the gateway offers no key');
  assert.equal(webPushAvailable({ ...secure, isSecureContext: false }, text), false, 'plain http on another host');
});

test('append-form message.update frames rebuild the whole text, counted in UTF-16 units', () => {
  const texts = new Map();
  const apply = (p) => (applyUpdate(texts, p) ? p.text : null);
  assert.equal(apply({ message_id: 'm', offset: 0, text: 'Hi 😀' }), 'Hi 😀');
  assert.equal(apply({ message_id: 'm', offset: 5, text: ' there' }), 'Hi 😀 there', 'the emoji is two units');
  assert.equal(apply({ message_id: 'm', offset: 2, text: '!' }), 'Hi!', 'a cut keeps the first units');
  assert.equal(apply({ message_id: 'm', offset: 9, text: 'x' }), null, 'an offset beyond the text is refused');
  assert.equal(texts.get('m'), 'Hi!');
  assert.equal(apply({ message_id: 'm', text: 'whole' }), 'whole', 'without offset the text is whole');
  const p = { message_id: 'n', offset: 0, text: 'a' };
  applyUpdate(texts, p);
  assert.equal('offset' in p, false, 'the rest of the client sees whole texts only');
});

test('push outcomes in plain words', () => {
  const now = 1_700_000_000_000;
  assert.equal(ago(now - 3000, now), 'just now');
  assert.equal(ago(now + 2000, now), 'just now', 'a clock a little ahead');
  assert.equal(ago(now - 60_000, now), '1 minute ago');
  assert.equal(ago(now - 150_000, now), '3 minutes ago');
  assert.equal(ago(now - 2 * 3600_000, now), '2 hours ago');
  assert.equal(ago(now - 3 * 86400_000, now), '3 days ago');
  assert.equal(routeText('webpush'), 'Web Push (this browser)');
  assert.equal(routeText(undefined), "None: notifications can't reach this device.");
  const at = now - 120_000;
  assert.equal(outcomeText({ backend: 'webpush', result: 'delivered', at }, now), 'Delivered 2 minutes ago');
  assert.equal(outcomeText({ backend: 'webpush', result: 'expired', detail: 'gone', at }, now),
    "Expired 2 minutes ago — this browser's subscription was removed. Turn notifications on again.");
  assert.equal(outcomeText({ backend: 'fcm', result: 'rejected', detail: 'INVALID_ARGUMENT', at }, now), 'Refused: INVALID_ARGUMENT (2 minutes ago)');
  assert.equal(outcomeText({ backend: 'ntfy', result: 'retrying', detail: 'HTTP 503', at }, now), 'Retrying: HTTP 503 (2 minutes ago)');
  assert.equal(outcomeText({ backend: 'ntfy', result: 'unreachable', detail: 'given up after 8 attempts', at }, now), 'Gave up after retries (2 minutes ago)');
});

test('a unified diff side by side: removed lines beside the added ones after them, numbered per side', () => {
  const rows = splitRows(['@@ -1,3 +1,4 @@', ' one', '-two', '-too', '+2', ' three', '+four', '\\ No newline at end of file', '@@ -10 +11 @@', '-x']);
  const cell = (c) => (c ? `${c.n}${c.kind[0]}:${c.text}` : '');
  assert.deepEqual(rows.map((r) => (r.hunk ? r.hunk : [cell(r.left), cell(r.right)])), [
    '@@ -1,3 +1,4 @@',
    ['1s:one', '1s:one'],
    ['2d:two', '2a:2'],
    ['3d:too', ''],
    ['4s:three', '3s:three'],
    ['', '4a:four'],
    '@@ -10 +11 @@',
    ['10d:x', ''],
  ]);
});

test('an export runs and fetches nothing: raw HTML as text, script links as words, remote images as links', () => {
  const same = (text) => assert.equal(harmless(text), text);
  assert.equal(harmless('Hi <img src=x onerror=alert(1)> there'), 'Hi &lt;img src=x onerror=alert(1)&gt; there');
  assert.equal(harmless('<script>\nalert(1)\n</script>\n\nok'), '&lt;script&gt;\nalert(1)\n&lt;/script&gt;\n\nok');
  assert.equal(harmless('a <!-- hidden --> b'), 'a &lt;!-- hidden --&gt; b');
  same('`<b>` and\n\n```html\n<script>x</script>\n```\n');
  assert.equal(harmless('see [the *docs*](javascript:alert(1)) now'), 'see the docs (link removed) now');
  assert.equal(harmless('[x]( JaVaScRiPt:alert(1))'), 'x (link removed)');
  assert.equal(harmless('<javascript:alert(1)>'), 'javascript:alert\\(1\\) (link removed)');
  assert.equal(harmless('[ref][r]\n\n[r]: vbscript:msgbox'), 'ref (link removed)\n\n[r]: vbscript:msgbox');
  assert.equal(harmless('[d](data:text/html;base64,PHNjcmlwdD4=)'), 'd (link removed)');
  same('[site](https://example.com/a) and [rel](notes.md) and <https://example.com>');
  assert.equal(harmless('![a cat](https://tracker.example/p.gif?id=1) hi'), '[a cat](<https://tracker.example/p.gif?id=1>) hi');
  assert.equal(harmless('![](//cdn.example/x.png)'), '[image](<//cdn.example/x.png>)');
  assert.equal(harmless('![x](javascript:alert(1))'), 'x (link removed)');
  assert.equal(harmless('[![badge](https://b.example/s.svg)](https://example.com)'), '[[badge](<https://b.example/s.svg>)](https://example.com)');
  same('![chart](media/chart.png)');
  // Inside quotes and lists the lines keep their marks; a link over two lines becomes one.
  assert.equal(harmless('> quoted <b>bold</b>\n> and [x](javascript:1)\n\n- item <i>\n  more <u>'),
    '> quoted &lt;b&gt;bold&lt;/b&gt;\n> and x (link removed)\n\n- item &lt;i&gt;\n  more &lt;u&gt;');
  assert.equal(harmless('> [a\n> b](javascript:x) c'), '> a b (link removed) c');
  assert.equal(harmless('- <div onclick=x>\n  hi'), '- &lt;div onclick=x&gt;\n  hi');
  assert.equal(harmless('# Title <script>x</script>\r\n\r\ntext'), '# Title &lt;script&gt;x&lt;/script&gt;\n\ntext');
});
