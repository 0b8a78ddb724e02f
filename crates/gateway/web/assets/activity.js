// What the agent is doing, as the page tells it: the label of the busy bar (thinking, running a
// named tool, waiting for an answer, writing) and the read ticks of the user's own bubbles.
//
// Ticks follow one rule that every device can apply to the same transcript, so that they agree:
// a user message shows ✓✓ ("Read") once the agent has taken it up, i.e. once the lane holds an
// answer, a reply or commentary with a later message id (ids sort by creation time), and ✓
// ("Delivered") before. The receipt the gateway sends only to the sending device is not used.
// Imports only state.js.

import { app } from './state.js';

/** The busy bar's text for a lane that is busy. */
export function busyLabel(lane) {
  if (lane.busy === 'waiting_input') {
    const open = [...app.pickers.values()].find((p) => p.lane === lane);
    const title = open && open.frame.payload.title;
    return title ? `Waiting for you: ${title}` : 'Waiting for your answer…';
  }
  if (lane.busy === 'tool') {
    const names = [...(lane.toolsOpen || new Map()).values()];
    return names.length ? `Running ${names[names.length - 1]}…` : 'Running a tool…';
  }
  if (lane.busy === 'cron') return 'Running a scheduled job…';
  const open = lane.stream && lane.items.get(lane.stream);
  if (open && open.dataset.text) return 'Writing…';
  return 'Thinking…';
}

/** Keeps each lane's open tool calls (`tool.start` … `tool.end`), named in the busy bar. */
export function trackTool(lane, frame) {
  if (!lane.toolsOpen) lane.toolsOpen = new Map();
  const p = frame.payload;
  if (frame.type === 'tool.start') lane.toolsOpen.set(p.index, p.name || 'a tool');
  else if (frame.type === 'tool.end') lane.toolsOpen.delete(p.index);
  else if (frame.type === 'agent.idle') lane.toolsOpen.clear();
}

/** Sets the ticks of every user bubble under `root` by the rule above. */
export function refreshTicks(root) {
  let last = '';
  for (const el of root.querySelectorAll('.msg[data-id]:not(.role-user), .commentary[data-id]')) {
    if (el.dataset.id > last) last = el.dataset.id;
  }
  for (const el of root.querySelectorAll('.msg.role-user[data-id]')) {
    const read = last !== '' && el.dataset.id < last;
    if (read) el.dataset.read = '1';
    else delete el.dataset.read;
    const ticks = el.querySelector('.ticks');
    const text = read ? '✓✓' : '✓';
    if (ticks && ticks.textContent !== text) {
      ticks.textContent = text;
      ticks.setAttribute('aria-label', read ? 'Read' : 'Delivered');
    }
  }
}

/**
 * Keeps the ticks of the lane shown right as messages are drawn, from history or live. Only
 * bubbles coming or going (children of the log, or of the lane shown in it) can change them; a
 * streaming update rewrites a bubble's inside and costs no scan of the lane.
 */
export function watchTicks(log) {
  let queued = false;
  new MutationObserver((records) => {
    if (queued || !records.some((r) => r.target === log || r.target.parentNode === log)) return;
    queued = true;
    queueMicrotask(() => {
      queued = false;
      refreshTicks(log);
    });
  }).observe(log, { childList: true, subtree: true });
}
