// The outbox: a message is kept here, in localStorage (so across reloads), from the moment it is
// sent until its echo (or the gateway's `ack {duplicate}`) arrives. Until then it shows as a
// "sending" bubble with Cancel; every time the connection is back it is sent again with the same
// `client_id`, which the gateway takes once (docs/protocol.md §6), so nothing is stored or run
// twice however often it is repeated.

import { app, getLane, store } from './state.js';
import { h } from './util.js';

const KEY = 'iris.outbox';
/** Sends under way on this connection, by client id. */
const inFlight = new Set();

function load() {
  try {
    const list = JSON.parse(store.getItem(KEY) || '[]');
    return Array.isArray(list) ? list : [];
  } catch {
    return [];
  }
}

function save(list) {
  store.setItem(KEY, JSON.stringify(list));
}

/** A fresh id for a request, unique to this device. */
export function newClientId() {
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  return `c_${[...bytes].map((b) => b.toString(16).padStart(2, '0')).join('')}`;
}

function laneFor(entry) {
  return getLane(entry.chat_id, entry.thread_id || null);
}

function pendingEl(entry) {
  return laneFor(entry).el.querySelector(`.msg.pending-send[data-client-id="${entry.client_id}"]`);
}

/** Draws an entry's "sending" bubble at the end of its lane (once). */
function drawPending(entry) {
  if (pendingEl(entry)) return;
  const el = h('article', { class: 'msg role-user pending-send', dataset: { clientId: entry.client_id }, 'aria-label': 'Your message, sending' },
    h('div', { class: 'md body' }, entry.payload.text || ''),
    h('div', { class: 'meta' },
      h('span', { class: 'receipt receipt-sending', title: 'Sending… (sent again when the connection is back)', 'aria-label': 'Sending' }, '🕓'),
      h('button', { type: 'button', class: 'cancel-send', onclick: () => cancel(entry.client_id) }, 'Cancel')));
  laneFor(entry).el.append(el);
}

/** Forgets a send: its echo came, it was refused, or it was cancelled. */
function forget(clientId) {
  save(load().filter((e) => e.client_id !== clientId));
  for (const el of document.querySelectorAll(`.msg.pending-send[data-client-id="${clientId}"]`)) el.remove();
}

function cancel(clientId) {
  forget(clientId);
}

/** Keeps a message to send in `lane`; returns its entry (then [`trySend`] it). */
export function keep(lane, payload) {
  const entry = { client_id: payload.client_id, chat_id: lane.chat_id, thread_id: lane.thread_id || null, payload };
  save([...load(), entry]);
  drawPending(entry);
  return entry;
}

/**
 * Sends an entry: resolves with the response (the echo, or `ack {duplicate}`), or null when the
 * connection is gone (the entry stays for the next connection); a refusal forgets it and throws.
 */
export async function trySend(entry) {
  if (inFlight.has(entry.client_id)) return null;
  inFlight.add(entry.client_id);
  try {
    const res = await app.conn.request('message.send', entry.payload, { chat_id: entry.chat_id, thread_id: entry.thread_id });
    forget(entry.client_id);
    return res;
  } catch (e) {
    if (e.code === 'disconnected') return null;
    forget(entry.client_id);
    throw e;
  } finally {
    inFlight.delete(entry.client_id);
  }
}

/** A user message arrived (live or replayed): a kept send with its `client_id` is done. */
export function onEcho(m) {
  if (m.role === 'user' && m.client_id) forget(m.client_id);
}

/** Draws every kept send (after a reload) and sends them again; `onError` gets refusals. */
export function resendAll(onError) {
  for (const entry of load()) {
    drawPending(entry);
    trySend(entry).catch(onError);
  }
}
