// The connection to the gateway: hello, requests matched by id, reconnects with backoff, and
// sync from a persisted cursor with no frame processed twice.
//
// Cursor bookkeeping (docs/protocol.md §3): live durable frames carry no cursor, but they arrive
// in cursor order with none skipped, so the first one after hello.ack is head_cursor + 1 and the
// first one after sync.done {cursor: H} is H + 1; replayed frames carry their cursor. `cursor`
// below is the highest C such that every durable frame up to C has been processed; it is kept in
// localStorage and the next connection syncs from it. Frames processed above it (live frames that
// came before an interrupted sync finished) are remembered in `seen`, so a replay skips them.
//
// Streaming (§7): hello asks for append-form message.update (caps.append_updates), and each one
// is turned back into the whole text here, from the text this connection last had for the
// bubble, before anything else sees it: the rest of the client only ever sees whole texts.

import { isDurable } from './util.js';

const BACKOFF_MS = [500, 1000, 2000, 4000, 8000, 15000];
const PING_EVERY_MS = 20000;
const SILENCE_LIMIT_MS = 50000;

/** Close codes of the gateway. */
export const CLOSE = { AUTH: 4401, VERSION: 4400, REPLACED: 4409, TOO_SLOW: 4429, GOING_AWAY: 1001 };

export class RequestError extends Error {
  constructor(code, message) {
    super(message || code);
    this.code = code;
  }
}

export class Connection {
  /**
   * @param {object} o
   * @param {string} o.url WebSocket URL
   * @param {string} o.token
   * @param {string} o.deviceId
   * @param {string} o.deviceName
   * @param {Storage} o.storage where the cursor is kept
   * @param {(frame: object) => void} o.onFrame every frame to process, once
   * @param {(state: object) => void} o.onState connection state changes
   * @param {(ack: object) => void} o.onHello each hello.ack
   * @param {(info: object) => void} o.onSynced each sync.done (with `gap`)
 * @param {() => object[]} [o.focus] the lanes shown (`hello.caps.focus`); without it, every lane streams
   */
  constructor(o) {
    Object.assign(this, o);
    this.ws = null;
    this.nextId = 1;
    this.pending = new Map();
    this.attempt = 0;
    this.timer = null;
    this.stopped = true;
    const stored = this.storage.getItem('iris.cursor');
    this.cursor = stored === null ? null : Number(stored);
    this.seen = new Set();
    /** message_id → the streamed text rebuilt on this connection. */
    this.streams = new Map();
    this.live = 0;
    this.synced = false;
    this.lastError = null;
    this.binarySink = null;
    this.state = { name: 'idle' };
    this.onOnline = () => this.state.name === 'offline' && this.connectNow();
    this.onVisible = () => document.visibilityState === 'visible' && this.state.name === 'offline' && this.connectNow();
  }

  start() {
    if (!this.stopped) return;
    this.stopped = false;
    window.addEventListener('online', this.onOnline);
    document.addEventListener('visibilitychange', this.onVisible);
    this.open();
  }

  /** Closes for good (sign-out). */
  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    clearInterval(this.pinger);
    window.removeEventListener('online', this.onOnline);
    document.removeEventListener('visibilitychange', this.onVisible);
    if (this.ws) this.ws.close(1000, 'bye');
    this.ws = null;
    this.setState({ name: 'stopped' });
  }

  /** Reconnects at once (the "Retry now" button, or coming back online). */
  connectNow() {
    if (this.stopped) {
      this.start();
      return;
    }
    clearTimeout(this.timer);
    if (!this.ws) this.open();
  }

  setState(state) {
    this.state = state;
    this.onState(state);
  }

  open() {
    clearTimeout(this.timer);
    this.setState({ name: this.state.name === 'restarting' ? 'restarting' : 'connecting', attempt: this.attempt });
    let ws;
    try {
      ws = new WebSocket(this.url);
    } catch (e) {
      this.scheduleReconnect();
      return;
    }
    ws.binaryType = 'arraybuffer';
    this.ws = ws;
    this.streams.clear();
    this.synced = false;
    this.lastError = null;
    ws.onopen = () => {
      this.lastRx = Date.now();
      this.sendFrame({
        type: 'hello',
        id: this.nextId++,
        payload: {
          token: this.token,
          device_id: this.deviceId,
          device_name: this.deviceName,
          caps: { min_protocol: 1, media: true, append_updates: true, ...(this.focus ? { focus: this.focus() } : {}) },
        },
      });
    };
    ws.onmessage = (ev) => {
      if (ws !== this.ws) return;
      this.lastRx = Date.now();
      if (typeof ev.data !== 'string') {
        if (this.binarySink) this.binarySink(ev.data);
        return;
      }
      let frame;
      try {
        frame = JSON.parse(ev.data);
      } catch {
        return;
      }
      if (frame && typeof frame.type === 'string') this.receive(frame);
    };
    ws.onclose = (ev) => {
      if (ws !== this.ws) return;
      this.ws = null;
      clearInterval(this.pinger);
      this.failPending();
      this.closed(ev.code, ev.reason);
    };
  }

  closed(code, reason) {
    if (this.stopped) return;
    if (code === CLOSE.AUTH) {
      this.stopped = true;
      this.setState({ name: 'auth', message: this.lastError || reason || 'The gateway refused the token.' });
    } else if (code === CLOSE.VERSION) {
      this.stopped = true;
      this.setState({ name: 'unsupported', message: reason || 'This gateway speaks another protocol version.' });
    } else if (code === CLOSE.REPLACED) {
      this.stopped = true;
      this.setState({ name: 'replaced' });
    } else {
      this.scheduleReconnect();
    }
  }

  scheduleReconnect() {
    const base = BACKOFF_MS[Math.min(this.attempt, BACKOFF_MS.length - 1)];
    const delay = Math.round(base * (0.8 + Math.random() * 0.4));
    this.attempt++;
    const restarting = this.state.name === 'restarting';
    this.setState({ name: restarting ? 'restarting' : 'offline', retryAt: Date.now() + delay });
    this.timer = setTimeout(() => this.open(), delay);
  }

  receive(frame) {
    if (frame.type === 'hello.ack') {
      this.attempt = 0;
      this.live = Number(frame.payload.head_cursor || 0);
      this.onHello(frame.payload);
      this.setState({ name: 'syncing' });
      this.startPinging();
      this.sync(frame.payload);
      return;
    }
    if (frame.type === 'error' && !this.synced && this.pending.size === 0) {
      // An error before hello.ack explains the close that follows (wrong token, revoked).
      this.lastError = frame.payload && frame.payload.message;
    }
    if (frame.type === 'message.update' && frame.payload) {
      if (!applyUpdate(this.streams, frame.payload)) return;
    } else if (frame.type === 'message.stop' && frame.payload) {
      this.streams.delete(frame.payload.message_id);
    }
    if (frame.type === 'status' && frame.payload && frame.payload.state === 'restarting') {
      this.setState({ name: 'restarting' });
    }
    if (isDurable(frame)) {
      frame.replayed = frame.cursor !== undefined;
      const c = frame.replayed ? Number(frame.cursor) : ++this.live;
      frame.cursor = c;
      if ((this.cursor !== null && c <= this.cursor) || this.seen.has(c)) {
        this.settle(frame);
        return;
      }
      this.seen.add(c);
      if (this.synced) this.advance(c);
    }
    if (frame.type === 'sync.done') {
      this.live = Number(frame.payload.cursor);
      this.synced = true;
      this.advance(this.live);
      this.setState({ name: 'online' });
      this.onSynced(frame.payload);
    }
    if (frame.type !== 'pong') this.onFrame(frame);
    this.settle(frame);
  }

  advance(c) {
    if (this.cursor !== null && c <= this.cursor) return;
    this.cursor = c;
    for (const s of this.seen) if (s <= c) this.seen.delete(s);
    this.storage.setItem('iris.cursor', String(c));
  }

  /** Replays what this browser has not processed yet. */
  async sync(ack) {
    const head = Number(ack.head_cursor || 0);
    // A first start needs no replay (history shows the past); a cursor above the head means the
    // gateway's data was reset, so everything it has is new.
    let from = this.cursor === null ? head : this.cursor > head ? 0 : this.cursor;
    if (this.cursor !== null && this.cursor > head) {
      this.cursor = null;
      this.seen.clear();
    }
    try {
      await this.request('sync', { cursor: from });
    } catch (e) {
      if (e instanceof RequestError && e.code === 'bad_request') {
        from = Number(ack.sync_cursor || 0);
        this.cursor = null;
        await this.request('sync', { cursor: from }).catch(() => {});
      }
    }
  }

  settle(frame) {
    if (frame.id === undefined || frame.id === null) return;
    const p = this.pending.get(frame.id);
    if (!p) return;
    if (p.stream) {
      if (p.stream(frame)) this.pending.delete(frame.id);
      return;
    }
    this.pending.delete(frame.id);
    if (frame.type === 'error') p.reject(new RequestError(frame.payload.code, frame.payload.message));
    else p.resolve(frame);
  }

  failPending() {
    const err = new RequestError('disconnected', 'The connection was lost.');
    for (const p of this.pending.values()) (p.reject || (() => {}))(err);
    for (const p of this.pending.values()) if (p.stream) p.stream({ type: 'error', payload: { code: 'disconnected', message: err.message } });
    this.pending.clear();
    this.binarySink = null;
  }

  startPinging() {
    clearInterval(this.pinger);
    this.pinger = setInterval(() => {
      if (!this.ws) return;
      if (Date.now() - this.lastRx > SILENCE_LIMIT_MS) {
        // A half-open connection: nothing arrives although we keep asking.
        const ws = this.ws;
        this.ws = null;
        ws.close(4000, 'silent');
        this.failPending();
        this.closed(1006, 'silent');
        return;
      }
      this.sendFrame({ type: 'ping', payload: { ts: Date.now() } });
    }, PING_EVERY_MS);
  }

  get online() {
    return Boolean(this.ws && this.ws.readyState === WebSocket.OPEN);
  }

  sendFrame(frame) {
    if (!this.online) throw new RequestError('disconnected', 'Not connected.');
    this.ws.send(JSON.stringify({ v: 1, ...frame }));
  }

  /**
   * Tells the gateway which lanes this page shows (focus, §7): streaming updates of the other
   * lanes stay away, and a lane coming into view gets its answer's text so far at once. Offline,
   * the next hello carries it.
   */
  setFocus(lanes) {
    if (this.online) this.request('focus.set', { lanes }).catch(() => {});
  }

  /** Sends a request and resolves with its response frame (rejects with a RequestError). */
  request(type, payload = {}, lane = {}) {
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      try {
        this.sendFrame({ type, id, ...laneFields(lane), payload });
      } catch (e) {
        reject(e);
        return;
      }
      this.pending.set(id, { resolve, reject });
    });
  }

  /**
   * Sends a request whose answer is several frames: `onFrame` gets each frame with the request's
   * id and returns true when the exchange is over. Returns the id.
   */
  stream(type, payload, onFrame, id = this.nextId++) {
    this.sendFrame({ type, id, payload });
    this.pending.set(id, { stream: onFrame });
    return id;
  }

  /** Sends raw bytes (a media chunk). */
  sendBinary(bytes) {
    if (!this.online) throw new RequestError('disconnected', 'Not connected.');
    this.ws.send(bytes);
  }

  /** Bytes queued in the socket, for upload progress and flow control. */
  get buffered() {
    return this.ws ? this.ws.bufferedAmount : 0;
  }
}

/**
 * Turns a `message.update` payload into its whole-text form, in place, keeping the text per
 * bubble in `texts`. With `offset` (append form) the first `offset` UTF-16 units of the bubble's
 * previous text stay and `text` follows; without it `text` is already whole. Returns false for an
 * update that does not fit (an offset beyond the text held), which is then dropped.
 */
export function applyUpdate(texts, p) {
  const id = p.message_id;
  let text = typeof p.text === 'string' ? p.text : '';
  if (typeof p.offset === 'number') {
    const held = texts.get(id) || '';
    if (p.offset > held.length) return false;
    text = held.slice(0, p.offset) + text;
    delete p.offset;
  }
  texts.set(id, text);
  p.text = text;
  return true;
}

function laneFields(lane) {
  const out = {};
  if (lane.chat_id) out.chat_id = lane.chat_id;
  if (lane.chat_id) out.thread_id = lane.thread_id || null;
  return out;
}
