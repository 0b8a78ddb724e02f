// A message's actions: the quick-action bar shown over its corner on hover or keyboard focus
// (Copy, Retry of an answer that did not complete, Regenerate or Edit where rewind.js offers
// them, Read aloud by speak.js), the ⋯ menu with all of them and Delete, and the gestures that
// open the menu (a long press on a touch screen, a right click). The transcript draws the bar
// into each message (`actionBar`) and starts the gestures once (`initMessageGestures`).

import { icon } from './icons.js';
import { promptOf, rewindButtons, rewindItems, syncRewindButtons } from './rewind.js';
import { canRead, isReading, toggleReading } from './speak.js';
import { $, app } from './state.js';
import { confirmDialog, popupMenu, request, toast } from './ui.js';
import { h } from './util.js';

/** How a turn that did not complete ended, as its answer says (`ended`). */
export const ENDINGS = { stopped: '■ Stopped', cut_off: '✂ Cut off', agent_failed: '⚠ Agent failed' };

/** How long a finger rests on a message before its actions open (as chat apps do). */
const LONG_PRESS_MS = 500;

/**
 * The quick actions of a message, shown over its corner on hover or keyboard focus (wide
 * screens): Copy, and Retry, Regenerate or Edit where the message's menu offers it (rewind.js),
 * and an answer's Read aloud (speak.js).
 * The ⋯ menu keeps all actions.
 */
export function actionBar(lane, el, m) {
  const bar = h('div', { class: 'msg-actions', role: 'group', 'aria-label': 'Quick actions' });
  if (m.text) bar.append(h('button', { type: 'button', onclick: () => copyText(el.dataset.text) }, icon('copy'), 'Copy'));
  if (ENDINGS[m.ended]) bar.append(h('button', { type: 'button', class: 'retry', onclick: () => retry(lane, el) }, 'Retry'));
  bar.append(...rewindButtons(lane, el, m));
  if (canRead() && m.role === 'assistant' && m.text) {
    const on = isReading(el);
    bar.append(h('button', { type: 'button', class: 'speak', 'aria-pressed': String(on), onclick: () => toggleReading(el) }, icon('speaker'), on ? 'Stop reading' : 'Read aloud'));
  }
  bar.hidden = !bar.childElementCount;
  return bar;
}

/** Puts a message's text on the clipboard and says so. */
function copyText(text) {
  const clipboard = navigator.clipboard;
  if (!clipboard) return toast('This browser does not let the page copy here.', 'error');
  return clipboard.writeText(text).then(() => toast('Copied'), () => toast('The browser refused to copy the text.', 'error'));
}

/** Runs an answer's prompt again, when the answer did not complete. */
function retry(lane, el) {
  const prompt = promptOf(lane, el);
  if (prompt) request('message.retry', { message_id: prompt }, lane);
}

/** The menu of all of a message's actions, below `anchor` (its ⋯ button). */
export function messageMenu(anchor, lane, el) {
  const items = [];
  if (el.dataset.text) items.push(['Copy text', () => copyText(el.dataset.text)]);
  // Retry regenerates, where that is on offer (rewind.js): the agent forgets the failed try.
  const rewind = rewindItems(lane, el);
  const prompt = ENDINGS[el.dataset.ended] && !rewind.length && promptOf(lane, el);
  if (prompt) items.push(['Retry', () => request('message.retry', { message_id: prompt }, lane)]);
  items.push(...rewind);
  if (canRead() && el.dataset.role === 'assistant' && el.dataset.text) items.push([isReading(el) ? 'Stop reading' : 'Read aloud', () => toggleReading(el)]);
  items.push(['Delete', async () => {
    const ok = await confirmDialog('Delete this message?', 'It is deleted on every device and cannot be recovered.', 'Delete');
    if (ok) request('message.delete', { message_ids: [el.dataset.id] }, lane);
  }]);
  popupMenu(anchor, items);
}

/** The lane a message element is drawn in. */
function laneOfElement(el) {
  for (const lane of app.lanes.values()) if (lane.el.contains(el)) return lane;
  return null;
}

/** Opens a message's menu, unless it is open already. */
function openActions(el) {
  const more = el.querySelector('.msg-more');
  const lane = laneOfElement(el);
  if (!more || !lane || more.getAttribute('aria-expanded') === 'true') return;
  messageMenu(more, lane, el);
}

/**
 * A long press on a message (a finger resting ~500 ms without moving) or a right click opens its
 * actions; links and images keep the browser's own menu.
 */
export function initMessageGestures() {
  const log = $('log');
  // Regenerate and Edit show in the quick actions only while on offer, worked out as they show.
  const sync = (ev) => {
    const el = ev.target.closest && ev.target.closest('.msg:not(.streaming)');
    const lane = el && laneOfElement(el);
    if (lane) syncRewindButtons(lane, el);
  };
  log.addEventListener('pointerover', sync);
  log.addEventListener('focusin', sync);
  let timer = null;
  let start = null;
  let pressedAt = 0;
  const cancel = () => {
    clearTimeout(timer);
    timer = null;
  };
  const target = (ev) => {
    const el = ev.target.closest('.msg:not(.streaming)');
    return el && !ev.target.closest('a, img, button, input, textarea, summary') ? el : null;
  };
  log.addEventListener('pointerdown', (ev) => {
    cancel();
    const el = ev.pointerType === 'touch' && target(ev);
    if (!el) return;
    start = [ev.clientX, ev.clientY];
    timer = setTimeout(() => {
      timer = null;
      pressedAt = performance.now();
      openActions(el);
    }, LONG_PRESS_MS);
  });
  log.addEventListener('pointermove', (ev) => {
    if (timer && Math.hypot(ev.clientX - start[0], ev.clientY - start[1]) > 10) cancel();
  });
  log.addEventListener('pointerup', cancel);
  log.addEventListener('pointercancel', cancel);
  log.addEventListener('contextmenu', (ev) => {
    const el = target(ev);
    if (!el) return;
    ev.preventDefault();
    openActions(el);
  });
  // The finger lifted after a long press: no focus move or click that would close the menu.
  log.addEventListener('touchend', (ev) => {
    if (performance.now() - pressedAt < 2000) ev.preventDefault();
    pressedAt = 0;
  }, { passive: false });
}
