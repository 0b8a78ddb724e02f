// Shared state of the page, imported by every view module. It owns the `app` record (the
// connection, the channel directory, the lanes and the one being shown, open pickers, pending
// attachments, display settings), the `Lane` model of one chat or thread together with its DOM
// element, and the lookups that map frames and ids to lanes and names. It touches no DOM other
// than the lanes' own elements and imports only util.js.

import { h, laneKey } from './util.js';

export const store = window.localStorage;
export const $ = (id) => document.getElementById(id);

/** One chat lane (a channel or a thread): its items and its DOM. */
export class Lane {
  constructor(chatId, threadId) {
    this.chat_id = chatId;
    this.thread_id = threadId || null;
    this.key = laneKey(chatId, threadId);
    this.items = new Map(); // id → element
    this.el = h('div', { class: 'lane', dataset: { lane: this.key } });
    this.historyLoaded = false;
    this.loading = null;
    this.hasMore = false;
    this.oldest = null;
    this.busy = null;
    this.turn = 0;
    this.turnOpen = false;
    this.stream = null;
    this.unread = 0;
  }

  /** Adds an element at the end, but keeps an open streaming bubble last. */
  append(id, el) {
    const open = this.stream && this.items.get(this.stream);
    if (open && open.isConnected && open.parentNode === this.el && id !== this.stream) this.el.insertBefore(el, open);
    else this.el.append(el);
    if (id) this.items.set(id, el);
  }
}

export const app = {
  conn: null,
  media: null,
  channels: new Map(),
  lanes: new Map(),
  current: null,
  catalog: [],
  catalogLoaded: false,
  pickers: new Map(),
  pickerShown: null,
  receiptsSent: new Set(),
  localMedia: new Map(),
  attachments: [],
  settings: { footer: store.getItem('iris.footer') !== 'off', tools: store.getItem('iris.tools') !== 'off' },
  toastBudget: 3,
  webpushKey: null,
  agents: [],
  voice: false,
  /** The gateway reads aloud in its own voice (`server_caps.speech`). */
  speech: false,
};

/** The default channel, or a stand-in for it while the directory is not known. */
export function defaultChannel() {
  return [...app.channels.values()].find((c) => c.is_default) || { chat_id: 'default' };
}

export function channelName(chatId) {
  const c = app.channels.get(chatId);
  return c ? c.name : chatId;
}

export function laneTitle(chatId, threadId) {
  return threadId ? `${channelName(chatId)} › ${channelName(threadId)}` : channelName(chatId);
}

export function getLane(chatId, threadId) {
  const key = laneKey(chatId, threadId);
  let lane = app.lanes.get(key);
  if (!lane) {
    lane = new Lane(chatId, threadId);
    app.lanes.set(key, lane);
  }
  return lane;
}

/** The lanes this page shows, as `hello.caps.focus` and `focus.set` name them. */
export function shownLanes() {
  const { chat_id, thread_id } = app.current;
  return [thread_id ? { chat_id, thread_id } : { chat_id }];
}

export function currentLane() {
  return getLane(app.current.chat_id, app.current.thread_id);
}

/** The lane a frame belongs to (the one shown when it names none). */
export function laneOf(frame) {
  const p = frame.payload || {};
  const chat = frame.chat_id || p.chat_id || app.current.chat_id;
  const thread = frame.thread_id !== undefined ? frame.thread_id : p.thread_id;
  return getLane(chat, thread || null);
}

/** The element with this id in whichever lane holds it. */
export function findMessage(id) {
  for (const lane of app.lanes.values()) {
    const el = lane.items.get(id);
    if (el) return el;
  }
  return null;
}

/** Forgets what a lane shows, so that its history is loaded again. */
export function resetLane(lane) {
  lane.items.clear();
  lane.el.replaceChildren();
  lane.historyLoaded = false;
  lane.hasMore = false;
  lane.oldest = null;
  lane.stream = null;
}
