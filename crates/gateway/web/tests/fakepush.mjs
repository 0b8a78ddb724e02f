// Web Push from the real gateway, seen from the other end: a push service on 127.0.0.1 that
// keeps every push (and answers what a test tells it to: 201, or 410 for a subscription that is
// gone, at once or when the test lets it), a subscriber that decrypts them as a browser would (RFC 8291), and a device in node that
// speaks the WebSocket protocol (to register a subscription as a device, or ask what a device may
// ask) without a browser.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';

import { ws as WebSocket } from 'playwright-core/lib/utilsBundle';

import { TOKEN } from './harness.mjs';

/**
 * A push service on 127.0.0.1 that keeps every POST to /push/<id> and accepts it (201), or
 * answers the status `answer.get(id)` says (410: the subscription is gone).
 */
export class FakePushService {
  constructor() {
    this.received = [];
    this.waiters = [];
    this.answer = new Map();
    this.gates = new Map();
    this.server = http.createServer((req, res) => {
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        const m = /^\/push\/([^/?]+)$/.exec(req.url);
        if (req.method !== 'POST' || !m) {
          res.writeHead(404).end();
          return;
        }
        const status = this.answer.get(m[1]) || 201;
        this.received.push({ id: m[1], headers: req.headers, body: Buffer.concat(chunks), status });
        const gate = this.gates.get(m[1]);
        if (gate) gate.then(() => res.writeHead(status).end());
        else res.writeHead(status).end();
        for (const w of [...this.waiters]) w();
      });
    });
  }

  async listen() {
    await new Promise((r) => this.server.listen(0, '127.0.0.1', r));
    this.base = `http://127.0.0.1:${this.server.address().port}/push/`;
    return this;
  }

  /** Holds the answers to pushes for `id` (the push service is slow) until the returned function is called. */
  hold(id) {
    let open;
    this.gates.set(id, new Promise((r) => { open = r; }));
    return () => {
      this.gates.delete(id);
      open();
    };
  }

  /** The pushes received for subscription `id`. */
  pushesTo(id) {
    return this.received.filter((p) => p.id === id);
  }

  /** The first push whose (decoded) value satisfies `pred`, as it arrives. */
  waitFor(decode, pred, timeoutMs = 20000) {
    return new Promise((resolve, reject) => {
      const check = () => {
        for (const push of this.received) {
          const value = decode(push);
          if (value !== undefined && pred(value)) {
            done();
            resolve(value);
            return true;
          }
        }
        return false;
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`no matching push within ${timeoutMs} ms (${this.received.length} received)`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        this.waiters = this.waiters.filter((w) => w !== check);
      };
      if (!check()) this.waiters.push(check);
    });
  }

  async close() {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }
}

/** A push subscriber: its P-256 key pair and auth secret, as a browser makes them. */
export class Subscriber {
  constructor(endpoint) {
    this.endpoint = endpoint;
    this.ecdh = crypto.createECDH('prime256v1');
    this.publicKey = this.ecdh.generateKeys();
    this.auth = crypto.randomBytes(16);
  }

  subscription() {
    return { endpoint: this.endpoint, p256dh: this.publicKey.toString('base64url'), auth: this.auth.toString('base64url') };
  }

  /** The JSON payload of an `aes128gcm` body (RFC 8291, RFC 8188), one record. */
  decrypt(body) {
    const salt = body.subarray(0, 16);
    const recordSize = body.readUInt32BE(16);
    const idLen = body[20];
    assert.equal(idLen, 65, "the key id is the sender's uncompressed P-256 key");
    const sender = body.subarray(21, 21 + idLen);
    const ciphertext = body.subarray(21 + idLen);
    assert.ok(ciphertext.length <= recordSize, 'one record');

    const shared = this.ecdh.computeSecret(sender);
    const info = Buffer.concat([Buffer.from('WebPush: info\0'), this.publicKey, sender]);
    const ikm = Buffer.from(crypto.hkdfSync('sha256', shared, this.auth, info, 32));
    const cek = Buffer.from(crypto.hkdfSync('sha256', ikm, salt, Buffer.from('Content-Encoding: aes128gcm\0'), 16));
    const nonce = Buffer.from(crypto.hkdfSync('sha256', ikm, salt, Buffer.from('Content-Encoding: nonce\0'), 12));
    const decipher = crypto.createDecipheriv('aes-128-gcm', cek, nonce);
    decipher.setAuthTag(ciphertext.subarray(ciphertext.length - 16));
    const plain = Buffer.concat([decipher.update(ciphertext.subarray(0, ciphertext.length - 16)), decipher.final()]);
    // The last record ends with the delimiter 2, then optional zero padding.
    let end = plain.length;
    while (end > 0 && plain[end - 1] === 0) end--;
    assert.equal(plain[end - 1], 2, 'last-record delimiter');
    return JSON.parse(plain.subarray(0, end - 1).toString('utf8'));
  }
}

/**
 * A device in node: connects as `deviceId` with `token` (and `webpush`, a subscription, in its
 * hello), and resolves once hello.ack came, with `ack`, `request(type, payload)` (resolves with
 * the response frame, rejects with an `error` frame's payload) and `close()`.
 */
export async function nodeDevice(gatewayUrl, { deviceId, token = TOKEN, name = 'Phone', webpush } = {}) {
  const url = new URL('ws', gatewayUrl);
  url.protocol = 'ws:';
  const socket = new WebSocket(url.href);
  const pending = new Map();
  let nextId = 2;
  const close = async () => {
    socket.removeAllListeners('close');
    const closed = new Promise((r) => socket.once('close', r));
    socket.close();
    await Promise.race([closed, new Promise((r) => setTimeout(r, 5000).unref())]);
  };
  try {
    let acked = false;
    const ack = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no hello.ack')), 15000);
      socket.on('error', (e) => { clearTimeout(timer); reject(e); });
      socket.on('close', (code) => { clearTimeout(timer); reject(new Error(`closed before hello.ack: ${code}`)); });
      socket.on('open', () => socket.send(JSON.stringify({
        type: 'hello',
        id: 1,
        payload: { token, device_id: deviceId, device_name: name, caps: { min_protocol: 1 }, ...(webpush ? { webpush } : {}) },
      })));
      socket.on('message', (data) => {
        const frame = JSON.parse(String(data));
        if (frame.type === 'hello.ack') {
          acked = true;
          clearTimeout(timer);
          resolve(frame.payload);
        } else if (frame.type === 'error' && !acked) {
          clearTimeout(timer);
          reject(new Error(`hello refused: ${JSON.stringify(frame.payload)}`));
        }
        const waiting = frame.id !== undefined && pending.get(frame.id);
        if (waiting) {
          pending.delete(frame.id);
          if (frame.type === 'error') waiting.reject(Object.assign(new Error(frame.payload.message), frame.payload));
          else waiting.resolve(frame);
        }
      });
    });
    const request = (type, payload = {}, timeoutMs = 15000) => new Promise((resolve, reject) => {
      const id = nextId++;
      const timer = setTimeout(() => { pending.delete(id); reject(new Error(`no answer to ${type}`)); }, timeoutMs);
      pending.set(id, {
        resolve: (f) => { clearTimeout(timer); resolve(f); },
        reject: (e) => { clearTimeout(timer); reject(e); },
      });
      socket.send(JSON.stringify({ v: 1, type, id, payload }));
    });
    return { ack, request, close };
  } catch (e) {
    await close();
    throw e;
  }
}

/** Connects as `deviceId` with `hello {webpush}`, waits for hello.ack, and leaves. */
export async function subscribeAndLeave(gatewayUrl, deviceId, subscription, token = TOKEN) {
  const device = await nodeDevice(gatewayUrl, { deviceId, token, webpush: subscription });
  await device.close();
  return device.ack;
}

/** Waits until `/healthz` counts `n` connections: a device is gone when the gateway says so. */
export async function waitConnections(gatewayUrl, n) {
  const deadline = Date.now() + 15000;
  for (;;) {
    const health = await (await fetch(new URL('healthz', gatewayUrl))).json();
    if (health.connections === n) return;
    if (Date.now() > deadline) throw new Error(`connections stayed ${health.connections}, not ${n}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
