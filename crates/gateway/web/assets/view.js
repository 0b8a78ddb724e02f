// Reading aids of the transcript: following the end of the lane shown (and the scroll-to-bottom
// button with its "new messages" marker while the user reads further up), the "N new" button
// that jumps to the first unread message (of a chat opened with unread messages, or of those
// that arrived while the user read further up) until it has been seen, date separators
// between messages of different days, the unread and waiting counts in the tab title, and the empty state
// of a chat without messages (with the demo agent's keywords when the chat talks to it). It
// draws only into the lane elements, the button it adds below the scroller and the title; the
// transcript calls it whenever a lane changes.

import { $, app, currentLane } from './state.js';
import { h } from './util.js';

const DAY_MS = 86400000;

/** Whether the user is at the end of the lane shown: new content is followed only then. */
let atBottom = true;

/**
 * The scroller's offset as last seen by its scroll event or set here: a reader scrolling up from
 * it leaves the end. Set with each scroll made here, as the browser may fire one scroll event for
 * this scroll and the reader's next one together.
 */
let lastTop = 0;

/** Shows the end of the lane, noting where that is. */
function toEnd(scroller) {
  scroller.scrollTop = scroller.scrollHeight;
  lastTop = scroller.scrollTop;
}

/** The demo agent's keywords worth trying, as the README lists them. */
const DEMO_KEYWORDS = [
  ['think', 'reasoning above the answer'],
  ['tool', 'a tool card that runs a command'],
  ['fail', 'a tool card that fails'],
  ['plan', 'a plan checklist'],
  ['approve', 'an approval to answer'],
  ['clarify', 'a question with choices'],
  ['slow', 'a slow answer you can stop or steer'],
  ['mkimage', 'an image in the answer'],
  ['mkfile', 'a file to download'],
  ['cost', 'a cost in the answer’s footer'],
];

/** Adds the scroll-to-bottom button and follows the scroller. */
export function initView() {
  const scroller = $('scroller');
  const button = h('button', {
    id: 'to-bottom', type: 'button', class: 'to-bottom', hidden: true, 'aria-label': 'Scroll to the latest messages', title: 'Latest messages',
    onclick: () => {
      follow(true);
      clearNew(currentLane());
    },
  }, h('span', { class: 'chevron', 'aria-hidden': 'true' }), h('span', { class: 'new-count', hidden: true }));
  scroller.after(button);
  const jump = h('button', {
    id: 'jump-unread', type: 'button', class: 'jump-unread', hidden: true,
    onclick: () => {
      const lane = currentLane();
      if (lane.jump) lane.jump.el.scrollIntoView({ block: 'center' });
    },
  });
  scroller.after(jump);
  seen = new IntersectionObserver((entries) => {
    for (const e of entries) {
      if (!e.isIntersecting) continue;
      seen.unobserve(e.target);
      for (const lane of app.lanes.values()) if (lane.jump && lane.jump.el === e.target) lane.jump = null;
    }
    renderJump();
  }, { root: scroller });
  // Only the reader leaves the end, by scrolling up: content that grows below the view between a
  // programmatic scroll and its scroll event is not a reason to stop following.
  lastTop = scroller.scrollTop;
  scroller.addEventListener('scroll', () => {
    const top = scroller.scrollTop;
    if (nearBottom()) atBottom = true;
    else if (top < lastTop) atBottom = false;
    lastTop = top;
    if (atBottom && app.current) clearNew(currentLane());
    renderButton();
    renderJump();
  }, { passive: true });
  // At the end, the end stays in view when the lane grows without a frame (an image loads, a
  // footer is drawn) or the scroller shrinks (the busy bar shows).
  const keepEnd = new ResizeObserver(() => {
    if (atBottom) toEnd(scroller);
  });
  keepEnd.observe($('log'));
  keepEnd.observe(scroller);
}

function nearBottom() {
  const s = $('scroller');
  return s.scrollHeight - s.scrollTop - s.clientHeight < 120;
}

/** Scrolls to the end when `force`d or when the user was at the end already. */
export function follow(force) {
  if (!force && !atBottom) return;
  atBottom = true;
  const s = $('scroller');
  requestAnimationFrame(() => {
    toEnd(s);
    renderButton();
  });
}

/** A new message `el` in the lane shown while the user reads further up: count and mark it. */
export function noteNew(lane, el) {
  if (atBottom || !el.classList.contains('msg')) return;
  lane.newCount = (lane.newCount || 0) + 1;
  // The person's own messages, sent from another device, are never unread.
  if (!el.classList.contains('role-user')) {
    if (lane.jump) {
      lane.jump.count++;
      renderJump();
    } else {
      markUnread(lane, el, 1);
    }
  }
  if (!lane.newDivider || !lane.newDivider.isConnected) {
    lane.newDivider = h('div', { class: 'new-divider', role: 'separator', 'aria-label': 'New messages' }, h('span', {}, 'New messages'));
    el.before(lane.newDivider);
  }
  renderButton();
}

/** Forgets the "new messages" marker of a lane (read, or shown from its end). */
export function clearNew(lane) {
  if (!lane.newCount && !lane.newDivider) return;
  lane.newCount = 0;
  if (lane.newDivider) lane.newDivider.remove();
  lane.newDivider = null;
  renderButton();
}

function renderButton() {
  const button = $('to-bottom');
  if (!button || !app.current) return;
  const lane = currentLane();
  button.hidden = atBottom;
  // Just above the scroller's lower edge, whatever the busy bar, tray and composer take below it.
  const scroller = $('scroller');
  button.style.bottom = `${scroller.offsetParent.clientHeight - scroller.offsetTop - scroller.offsetHeight + 14}px`;
  const count = button.querySelector('.new-count');
  count.hidden = !lane.newCount;
  count.textContent = lane.newCount ? String(lane.newCount) : '';
  button.setAttribute('aria-label', lane.newCount ? `Scroll to the latest messages, ${lane.newCount} new` : 'Scroll to the latest messages');
}

// ----- the first unread message --------------------------------------------------------------

/** Notes when the first unread message of a lane (`lane.jump.el`) comes into view. */
let seen = null;

/**
 * `el` is the first of `count` unread messages of `lane`: the "N new" button jumps to it until it
 * has been in view. Watched from the frame after next, once the lane has scrolled where it goes.
 */
export function markUnread(lane, el, count) {
  forgetUnread(lane);
  lane.jump = { el, count };
  renderJump();
  requestAnimationFrame(() => requestAnimationFrame(() => {
    if (lane.jump && lane.jump.el === el) seen.observe(el);
  }));
}

/** Forgets a lane's first unread message. */
export function forgetUnread(lane) {
  if (lane.jump && seen) seen.unobserve(lane.jump.el);
  lane.jump = null;
  renderJump();
}

/** The "N new ↑/↓" button: shown while the lane shown has a first unread message not yet seen. */
function renderJump() {
  const button = $('jump-unread');
  if (!button || !app.current) return;
  const { jump } = currentLane();
  button.hidden = !jump || !jump.el.isConnected;
  if (button.hidden) return;
  const scroller = $('scroller');
  const above = jump.el.getBoundingClientRect().top < scroller.getBoundingClientRect().top;
  button.textContent = `${jump.count} new ${above ? '↑' : '↓'}`;
  button.setAttribute('aria-label', `Jump to the first of ${jump.count} new messages`);
  button.style.top = `${scroller.offsetTop + 10}px`;
}

// ----- date separators ---------------------------------------------------------------------

function startOfDay(ts) {
  return new Date(ts).setHours(0, 0, 0, 0);
}

/** "Today", "Yesterday", else the weekday and date (with the year when it is not this one). */
export function dayLabel(ts, now = Date.now()) {
  const days = Math.round((startOfDay(now) - startOfDay(ts)) / DAY_MS);
  if (days === 0) return 'Today';
  if (days === 1) return 'Yesterday';
  const opts = { weekday: 'long', day: 'numeric', month: 'long' };
  if (new Date(ts).getFullYear() !== new Date(now).getFullYear()) opts.year = 'numeric';
  return new Date(ts).toLocaleDateString([], opts);
}

/** Puts a separator above the first message of each day in the lane (by the messages' `ts`). */
function renderDays(lane) {
  for (const sep of lane.el.querySelectorAll(':scope > .day-sep')) sep.remove();
  let last = null;
  for (const el of lane.el.querySelectorAll(':scope > .msg')) {
    const ts = Number(el.dataset.ts);
    if (!ts) continue;
    const day = startOfDay(ts);
    if (day !== last) {
      const label = dayLabel(ts);
      el.before(h('div', { class: 'day-sep', role: 'separator', 'aria-label': label },
        h('time', { datetime: new Date(day).toISOString().slice(0, 10) }, label)));
    }
    last = day;
  }
}

// ----- the empty state ---------------------------------------------------------------------

function emptyState(lane) {
  const entry = app.channels.get(lane.thread_id || lane.chat_id) || {};
  const parts = [h('h2', {}, 'No messages yet'), h('p', {}, 'Type a message below and press Enter to send it. Files can be attached, or dropped here.')];
  if (entry.agent === 'demo') {
    parts.push(
      h('p', {}, 'This chat talks to the demo agent: it answers “Echo: …” to what you write, and these words in a message show what Iris can do:'),
      h('ul', { class: 'demo-keywords' }, DEMO_KEYWORDS.map(([word, what]) => h('li', {},
        h('button', { type: 'button', class: 'keyword', onclick: () => tryKeyword(word) }, word), ` ${what}`))),
    );
  } else if (entry.agent) {
    parts.push(h('p', {}, `This chat talks to the agent “${entry.agent}”.`));
  } else {
    parts.push(h('p', {}, 'No agent answers here: messages are kept and shown on all your devices.'));
  }
  return h('section', { class: 'empty-state', 'aria-label': 'Empty chat' }, ...parts);
}

/** Puts a keyword into the message box, ready to send. */
function tryKeyword(word) {
  const box = $('composer-input');
  box.value = `${word} `;
  box.dispatchEvent(new Event('input', { bubbles: true }));
  box.focus();
}

function renderEmpty(lane) {
  const shown = lane.el.querySelector(':scope > .empty-state');
  const empty = lane.historyLoaded && !lane.el.querySelector(':scope > :not(.empty-state):not(.day-sep):not(.new-divider)');
  if (empty && !shown) lane.el.prepend(emptyState(lane));
  else if (!empty && shown) shown.remove();
}

/** Brings a lane's separators and empty state in line with its messages. */
export function refreshLane(lane) {
  renderDays(lane);
  renderEmpty(lane);
}

// ----- unread count in the title -----------------------------------------------------------

/** Messages not yet seen in every lane: other chats', and the one shown while the page is hidden. */
export function unreadTotal() {
  let n = 0;
  for (const lane of app.lanes.values()) n += lane.unread || 0;
  return n;
}

/**
 * The tab title with the unread count in front: "(3) Chat · Iris"; while pickers wait for an
 * answer (the inbox), their count comes first: "[2 waiting] (3) Chat · Iris",
 * "[1 waiting] Chat · Iris".
 */
export function titleWithUnread(title) {
  const n = unreadTotal();
  const unread = n ? `(${n}) ${title}` : title;
  return app.pickers.size ? `[${app.pickers.size} waiting] ${unread}` : unread;
}
