// The transcript: the lane being shown in `#log` and everything drawn into lanes. It owns
// switching lanes (`showLane`) and the top-bar title, history pages and scroll-up pagination,
// message bubbles (text, reasoning, media, the meta line with the ⋯ button and the quick-action
// bar of msgactions.js, which also holds the menu and the gestures that open it), streaming
// answers, commentary and tool cards (drawn by steps.js, live and from an answer's `steps` in
// history; the line under an answer that opens its turn's file changes by turnchanges.js), the
// busy line above the composer, read receipts in both directions and deletions. Its reading aids
// (following the end, the "new messages" marker, the jump to the first unread message, date
// separators, the unread count in the title, the empty state) are in view.js, the image
// lightbox in lightbox.js and drag-and-drop upload in dropzone.js; it starts all three.
// What it needs from other views comes in through `initTranscript` callbacks:
// redrawing the chat list, updating the composer, and closing pickers a lane has moved past.

import { busyLabel } from './activity.js';
import { initDropzone } from './dropzone.js';
import { icon } from './icons.js';
import { initLightbox, openLightbox } from './lightbox.js';
import { markdown } from './markdown.js';
import { noteRuntime, renderModelChip } from './modelchip.js';
import { ENDINGS, actionBar, initMessageGestures, messageMenu } from './msgactions.js';
import { laneShown } from './rewind.js';
import { $, app, currentLane, findMessage, getLane, laneOf, laneTitle, shownLanes, store } from './state.js';
import { answerCompleted } from './speak.js';
import { transcriptEl, voiceNote } from './voice.js';
import { commentaryCard, fillToolCard, stepCards, toolCard } from './steps.js';
import { noteTurnChanges } from './turnchanges.js';
import { request, toast } from './ui.js';
import { formatBytes, formatTime, h, runtimeFooter, showsInline } from './util.js';
import {
  clearNew, follow, forgetUnread, initView, markUnread, noteNew, refreshLane, titleWithUnread,
} from './view.js';

const PICKERS_ENDED_BY_A_TURN = ['picker.approval', 'picker.clarify', 'picker.confirm'];

const hooks = {
  /** Redraws the chat list (unread counts, the current chat). */
  renderSidebar: () => {},
  /** Brings the composer in line with the busy state of the lane shown. */
  updateComposer: () => {},
  /** `(lane, types)`: settles the lane's open pickers of these types. */
  closeStalePickers: () => {},
};

/** Connects the transcript to the other views and starts its page-level observers. */
export function initTranscript(callbacks) {
  Object.assign(hooks, callbacks);
  // Scroll-up pagination: a sentinel above the messages loads the previous page when it shows.
  new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting) && app.current && app.conn && app.conn.state.name === 'online') {
      const lane = currentLane();
      if (lane.historyLoaded && lane.hasMore) loadHistory(lane, true);
    }
  }, { root: $('scroller'), rootMargin: '200px 0px 0px 0px' }).observe($('older'));
  document.addEventListener('visibilitychange', () => {
    if (!app.current || document.hidden) return;
    // Back on the page: what arrived in the chat shown meanwhile has been seen now.
    const lane = currentLane();
    if (lane.unread) {
      lane.unread = 0;
      renderTitle();
      hooks.renderSidebar();
    }
    sendReceipts(lane);
  });
  initView();
  initMessageGestures();
  initLightbox();
  initDropzone();
}

// ----- lanes -------------------------------------------------------------------------------

export function showLane(chatId, threadId) {
  app.current = { chat_id: chatId, thread_id: threadId || null };
  store.setItem('iris.lane', JSON.stringify(app.current));
  if (app.conn) app.conn.setFocus(shownLanes());
  const lane = currentLane();
  const unread = lane.unread;
  lane.unread = 0;
  clearNew(lane);
  forgetUnread(lane);
  $('log').replaceChildren(lane.el);
  laneShown();
  if (lane.historyLoaded) refreshLane(lane);
  renderTitle();
  hooks.renderSidebar();
  renderBusy();
  if (!lane.historyLoaded && app.conn && app.conn.state.name === 'online') loadHistory(lane).then(() => markFirstUnread(lane, unread));
  else markFirstUnread(lane, unread);
  scrollToEnd(true);
  sendReceipts(lane);
}

/** The first of the `count` messages that were unread in a lane when it was opened. */
function markFirstUnread(lane, count) {
  if (!count || lane !== currentLane()) return;
  const others = [...lane.el.querySelectorAll(':scope > .msg:not(.role-user)')];
  const first = others[Math.max(0, others.length - count)];
  if (first) markUnread(lane, first, count);
}

export function renderTitle() {
  if (!app.current) return;
  const title = laneTitle(app.current.chat_id, app.current.thread_id);
  $('lane-title').textContent = title;
  renderModelChip();
  document.title = titleWithUnread(`${title} · Iris`);
}

/** Loads the latest page of a lane, or with `older` the page before the oldest one shown. */
export function loadHistory(lane, older = false) {
  if (lane.loading) return lane.loading;
  if (older && !lane.hasMore) return Promise.resolve(false);
  const payload = { limit: 50 };
  if (older) payload.before_message_id = lane.oldest;
  const scroller = $('scroller');
  const fromBottom = scroller.scrollHeight - scroller.scrollTop;
  lane.loading = request('history', payload, lane, { quiet: older })
    .then((res) => {
      if (!res) return false;
      const { messages, has_more: hasMore, oldest_message_id: oldest } = res.payload;
      const first = older || !lane.historyLoaded ? lane.el.firstChild : null;
      const frag = document.createDocumentFragment();
      for (const m of messages) {
        if (lane.items.has(m.message_id)) continue;
        // The turn's cards above its answer, as they were shown live.
        for (const [key, card] of stepCards(m.message_id, m.steps, store.getItem('iris.device_id'))) {
          lane.items.set(key, card);
          frag.append(card);
        }
        const el = messageEl(lane, m);
        lane.items.set(m.message_id, el);
        frag.append(el);
      }
      lane.el.insertBefore(frag, first);
      for (const m of messages) if (m.role === 'assistant' && m.steps) noteTurnChanges(lane.items.get(m.message_id), m.turn_changes || []);
      if (!lane.historyLoaded || older) {
        lane.hasMore = hasMore;
        lane.oldest = oldest || lane.oldest;
      }
      lane.historyLoaded = true;
      refreshLane(lane);
      if (lane === currentLane()) {
        if (older) scroller.scrollTop = scroller.scrollHeight - fromBottom;
        else scrollToEnd(true);
      }
      return true;
    })
    .finally(() => {
      lane.loading = null;
    });
  return lane.loading;
}

/** Scrolls to the end of the lane shown when `force`d or when the user is there already. */
export function scrollToEnd(force) {
  follow(force);
}

/**
 * Something new in a lane (`el`, when it is a new element): follow it when shown, or mark it as
 * new while the user reads further up; count it as unread in another lane, or in the lane shown
 * while the page is hidden (never a user message: those are one's own, from this device or another).
 */
function noteActivity(lane, frame, el) {
  // One's own messages, sent from any device, are never unread.
  const counts = frame && ['message', 'message.stop'].includes(frame.type) && (frame.payload || {}).role !== 'user';
  if (lane === currentLane()) {
    const own = Boolean(frame && frame.id !== undefined);
    if (el && !own) noteNew(lane, el);
    scrollToEnd(own);
    if (counts && !own && document.hidden) countUnread(lane);
  } else if (counts) {
    countUnread(lane);
  }
  refreshLane(lane);
}

function countUnread(lane) {
  lane.unread++;
  hooks.renderSidebar();
  renderTitle();
}

/** Adds an element (a picker card, a notice) at the end of a lane and notes it. */
export function appendToLane(lane, id, el, frame) {
  lane.append(id, el);
  noteActivity(lane, frame, el);
}

// ----- messages ----------------------------------------------------------------------------

function messageEl(lane, m, opts = {}) {
  const el = h('article', {
    class: `msg role-${m.role}${opts.streaming ? ' streaming' : ''}`,
    dataset: { id: m.message_id, role: m.role },
    'aria-label': `${roleLabel(m.role)} message`,
  });
  fillMessage(el, lane, m, opts);
  return el;
}

function roleLabel(role) {
  return { user: 'Your', assistant: 'Agent', system: 'System', cron: 'Scheduled' }[role] || role;
}


function fillMessage(el, lane, m, opts = {}) {
  noteRuntime(lane, m);
  const parts = [];
  if (m.reasoning) {
    parts.push(h('details', { class: 'reasoning' }, h('summary', {}, 'Reasoning'), h('div', { class: 'md' }, markdown(m.reasoning))));
  }
  const body = h('div', { class: 'md body' });
  if (m.text) body.append(markdown(m.text));
  else if (opts.streaming) body.append(h('span', { class: 'dots', 'aria-label': 'Typing' }, h('i'), h('i'), h('i')));
  parts.push(body);
  if (m.media && m.media.length) parts.push(mediaList(m.media));
  if (m.transcript) parts.push(transcriptEl(lane, m.message_id, m.transcript));
  const meta = h('div', { class: 'meta' });
  if (m.ts) meta.append(h('time', { datetime: new Date(m.ts).toISOString() }, formatTime(m.ts)));
  if (m.role === 'assistant' && m.runtime && app.settings.footer) meta.append(h('button', { type: 'button', class: 'runtime', 'aria-expanded': 'false', title: 'Show all' }, runtimeFooter(m.runtime)));
  if (m.steering) meta.prepend(h('span', { class: 'steering' }, '↪ Steering'));
  if (ENDINGS[m.ended]) meta.append(h('span', { class: `ended ended-${m.ended}` }, ENDINGS[m.ended]));
  const state = m.state || el.dataset.state;
  if (state) el.dataset.state = state;
  if (state === 'replaced') meta.append(REPLACED());
  if (m.role === 'user') {
    meta.append(receiptEl(state));
    meta.append(h('span', { class: 'ticks', 'aria-label': el.dataset.read ? 'Read' : 'Delivered', hidden: hasGlyph(state) }, el.dataset.read ? '✓✓' : '✓'));
  }
  if (!opts.streaming) {
    meta.append(h('button', {
      type: 'button', class: 'icon msg-more', 'aria-label': 'Message actions', 'aria-haspopup': 'menu', 'aria-expanded': 'false',
      onclick: (ev) => {
        ev.stopPropagation();
        messageMenu(ev.currentTarget, lane, el);
      },
    }, icon('ellipsis')));
  }
  parts.push(meta);
  if (!opts.streaming) parts.push(actionBar(lane, el, m));
  el.replaceChildren(...parts);
  el.dataset.text = m.text || '';
  if (m.ts) el.dataset.ts = String(m.ts);
  if (m.ended) el.dataset.ended = m.ended;
  if (m.reply_to) el.dataset.replyTo = m.reply_to;
  if (m.runtime) el.dataset.rewind = m.runtime.rewind ? '1' : '';
}

/** The mark of a message taken back by a regenerate or an edit. */
const REPLACED = () => h('span', { class: 'replaced', title: 'Taken back by a regenerate or an edit' }, 'Replaced');

/**
 * Where a user message stands with the agent (`state`, `message.state`), drawn the same on every
 * device, one mark at a time: a clock while it waits, then the read ticks (✓ delivered, ✓✓ read;
 * `activity.js`) while it runs and once answered, or the mark of how it ended (stopped, failed,
 * interrupted) in their place; the words on hover.
 */
const RECEIPTS = {
  queued: ['🕓', 'Waiting for the agent'],
  running: ['', 'The agent is working on it'],
  answered: ['', 'Answered'],
  stopped: ['■', 'Stopped'],
  failed: ['⚠', 'The agent could not answer it'],
  interrupted: ['✂', 'Interrupted by a restart of the gateway'],
  replaced: ['', ''],
};

/** Whether the receipt of `state` shows a mark of its own (the ticks are hidden then). */
const hasGlyph = (state) => Boolean((RECEIPTS[state] || [''])[0]);

function receiptEl(state) {
  const [glyph, words] = RECEIPTS[state] || ['', ''];
  return h('span', { class: `receipt receipt-${state || 'none'}`, title: words, 'aria-label': words, hidden: !glyph }, glyph);
}

/** `message.state`: a user message's receipt changed. */
export function onMessageState(frame) {
  const { message_id: id, state } = frame.payload;
  const el = findMessage(id);
  if (!el) return;
  el.dataset.state = state;
  const old = el.querySelector('.meta .receipt');
  if (old) old.replaceWith(receiptEl(state));
  const ticks = el.querySelector('.meta .ticks');
  if (ticks) ticks.hidden = hasGlyph(state);
  const meta = el.querySelector('.meta');
  if (state === 'replaced' && meta && !meta.querySelector('.replaced')) meta.prepend(REPLACED());
}

/**
 * The turns running when this page connected (`hello.ack.running`): each lane is busy, and its
 * answer so far is shown as streaming, with Stop, as if the page had seen it start.
 */
export function joinRunning(running) {
  for (const r of running) {
    const lane = getLane(r.chat_id, r.thread_id || null);
    if (!lane.busy) {
      lane.turn++;
      lane.turnOpen = true;
      lane.busy = 'processing';
    }
    if (r.message_id) {
      const el = streamingBubble(lane, r.message_id, null);
      if (r.text) drawStreaming(el, lane, r.message_id, r.text);
    }
    if (lane === currentLane()) renderBusy();
  }
}

/** The streaming bubble of an answer, made (at the end of its lane) when it is not shown yet. */
function streamingBubble(lane, id, frame) {
  const shown = lane.items.get(id);
  if (shown) return shown;
  lane.stream = id;
  const el = messageEl(lane, { message_id: id, role: 'assistant', text: '', ts: Date.now() }, { streaming: true });
  lane.el.append(el);
  lane.items.set(id, el);
  noteActivity(lane, frame, el);
  return el;
}

/** A complete message: replaces the bubble with its id (in any lane) or adds one. */
export function upsertMessage(lane, m, frame) {
  let el = lane.items.get(m.message_id) || findMessage(m.message_id);
  if (el) {
    el.classList.remove('streaming');
    fillMessage(el, lane, m);
  } else {
    el = messageEl(lane, m);
    appendToLane(lane, m.message_id, el, frame);
  }
  if (m.role === 'assistant') noteTurnChanges(el, m.turn_changes || []);
  return el;
}

/**
 * Draws a streaming bubble's latest text soon, once for all updates that came meanwhile, and
 * spaced by four times what the last draw cost: a long answer, whose every draw renders all of
 * its Markdown again, cannot keep the page busy. `message.stop` draws the final text itself.
 */
function drawStreaming(el, lane, id, text) {
  el.pendingText = text;
  if (el.drawQueued) return;
  el.drawQueued = true;
  const wait = Math.max(0, (el.drawnAt || 0) + 4 * (el.drawCost || 0) - performance.now());
  setTimeout(() => {
    el.drawQueued = false;
    const pending = el.pendingText;
    el.pendingText = undefined;
    if (pending === undefined || !el.classList.contains('streaming')) return;
    const start = performance.now();
    fillMessage(el, lane, { message_id: id, role: el.dataset.role, text: pending }, { streaming: true });
    el.drawnAt = performance.now();
    el.drawCost = el.drawnAt - start;
    el.hidden = false;
    scrollToEnd(false);
  }, wait);
}

/** `message.start`, `message.update` and `message.stop`: a streamed answer. */
export function onStreamFrame(frame) {
  const lane = laneOf(frame);
  const p = frame.payload;
  switch (frame.type) {
    case 'message.start': {
      if (lane.items.has(p.message_id)) break;
      streamingBubble(lane, p.message_id, frame);
      break;
    }
    case 'message.update': {
      // An update of a bubble not seen yet (its start is below this page's cursor): shown from
      // here on (protocol §7, rule 4), unless the answer already ended.
      const el = lane.items.get(p.message_id) || findMessage(p.message_id) || streamingBubble(lane, p.message_id, frame);
      if (!el.classList.contains('streaming')) break;
      // Each update carries the whole text so far (conn.js rebuilds it from appends): replace.
      drawStreaming(el, lane, p.message_id, p.text);
      break;
    }
    case 'message.stop': {
      if (lane.stream === p.message_id) lane.stream = null;
      const m = {
        message_id: p.message_id, role: 'assistant', text: p.final_text, reasoning: p.reasoning, runtime: p.runtime,
        media: p.media, ts: Date.now(), model: p.model, ended: p.ended, turn_changes: p.turn_changes || [],
      };
      const el = lane.items.get(p.message_id);
      if (el) {
        const live = el.classList.contains('streaming');
        el.classList.remove('streaming');
        fillMessage(el, lane, m);
        // Keep the answer below the turn's commentary and tool cards.
        lane.el.append(el);
        noteTurnChanges(el, m.turn_changes);
        if (live && m.text) answerCompleted(lane, el, p.ended);
      } else {
        upsertMessage(lane, m, frame);
      }
      noteActivity(lane, frame);
      if (!document.hidden && lane === currentLane()) sendReceipt(lane, p.message_id);
      break;
    }
    default:
      break;
  }
}

export function onDeleted(frame) {
  for (const id of frame.payload.message_ids || []) {
    for (const lane of app.lanes.values()) {
      const el = lane.items.get(id);
      if (el) {
        el.remove();
        lane.items.delete(id);
        refreshLane(lane);
      }
    }
  }
}

// ----- read receipts -----------------------------------------------------------------------

export function sendReceipt(lane, messageId) {
  if (app.receiptsSent.has(messageId) || !app.conn.online) return;
  app.receiptsSent.add(messageId);
  try {
    app.conn.sendFrame({ type: 'read.receipt', chat_id: lane.chat_id, thread_id: lane.thread_id, payload: { message_id: messageId, chat_id: lane.chat_id } });
  } catch {
    app.receiptsSent.delete(messageId);
  }
}

/** Marks the lane's last complete answer read, when the page is visible and online. */
export function sendReceipts(lane) {
  if (document.hidden || !app.conn || !app.conn.online) return;
  const last = [...lane.el.querySelectorAll('.msg.role-assistant:not(.streaming)')].pop();
  if (last) sendReceipt(lane, last.dataset.id);
}

// ----- commentary, tools and the busy line -------------------------------------------------

export function onCommentary(frame) {
  const lane = laneOf(frame);
  const p = frame.payload;
  const existing = lane.items.get(p.message_id);
  if (existing) {
    existing.replaceChildren(h('div', { class: 'md' }, markdown(p.text)));
    return;
  }
  appendToLane(lane, p.message_id, commentaryCard(p.message_id, p.text), frame);
}

/** `agent.busy` and `agent.idle`: a turn starts, changes phase or ends. */
export function onBusy(frame) {
  const lane = laneOf(frame);
  if (frame.type === 'agent.busy') {
    if (!lane.turnOpen) {
      lane.turn++;
      lane.turnOpen = true;
    }
    lane.busy = frame.payload.reason || 'processing';
    // An approval or question answered on another device: the lane goes on without it.
    if (lane.busy !== 'waiting_input') hooks.closeStalePickers(lane, PICKERS_ENDED_BY_A_TURN);
  } else {
    lane.busy = null;
    lane.turnOpen = false;
    lane.stream = null;
    for (const el of lane.el.querySelectorAll('.msg.streaming')) {
      if (!el.dataset.text) el.remove();
      else el.classList.remove('streaming');
    }
    hooks.closeStalePickers(lane, PICKERS_ENDED_BY_A_TURN);
  }
  if (lane === currentLane()) renderBusy();
}

function toolKey(lane, index) {
  return `tool:${lane.turn}:${index}`;
}

/** `tool.start`, `tool.progress` and `tool.end`: one card per tool call of the turn. */
export function onTool(frame) {
  const lane = laneOf(frame);
  const p = frame.payload;
  const key = toolKey(lane, p.index);
  let card = lane.items.get(key);
  if (frame.type === 'tool.start' || !card) {
    if (card && frame.type === 'tool.start') return;
    card = toolCard(key, { name: p.name, emoji: p.emoji, preview: p.preview, args: p.args });
    appendToLane(lane, key, card, frame);
  }
  const d = card.data;
  if (frame.type === 'tool.progress') d.note = p.note;
  if (frame.type === 'tool.end') {
    d.ok = p.ok;
    d.duration = p.duration;
    d.output = p.output_preview;
  }
  // File changes come on `tool.start`, or on `tool.end` when a later update brought them.
  if (Array.isArray(p.changes) && p.changes.length) d.changes = p.changes;
  fillToolCard(card);
}

export function renderBusy() {
  const lane = currentLane();
  $('busy').hidden = !lane.busy;
  if (lane.busy) $('busy-text').textContent = busyLabel(lane);
  hooks.updateComposer();
}

/** A `status` frame: a notice in the lane shown when the gateway goes down for a restart. */
export function onStatus(frame) {
  if (frame.payload.state === 'restarting') {
    const lane = currentLane();
    lane.append(null, h('div', { class: 'notice' }, 'Gateway restarting…'));
    scrollToEnd(true);
  }
}

// ----- media in messages -------------------------------------------------------------------

function mediaList(list) {
  const box = h('div', { class: 'media' });
  for (const m of list) {
    // Inline only what the gateway verified as a raster image; the local copy of a picture this
    // browser sent stands in for it then, never for a file.
    const inline = showsInline(m) && m.size <= 20 * 1024 * 1024;
    const local = inline && app.localMedia.get(`${m.filename}:${m.size}`);
    if (local && !app.media.urls.has(m.media_id)) app.media.remember(m.media_id, local);
    if (m.voice) box.append(voiceNote(m));
    else if (inline) box.append(inlineImage(m));
    else box.append(fileChip(m));
  }
  return box;
}

function inlineImage(m) {
  const img = h('img', { alt: m.filename || 'image', class: 'inline-image', loading: 'lazy' });
  // The image is a button: it opens full size in the lightbox.
  const open = h('button', { type: 'button', class: 'image-open', 'aria-label': `View ${m.filename || 'the image'} full size`, onclick: () => openLightbox(img, open) }, img);
  const bar = h('progress', { max: 100, value: 0, 'aria-label': `Loading ${m.filename}` });
  const fig = h('figure', { class: 'image loading', dataset: { media: m.media_id } }, open, bar);
  app.media.url(m, (f) => { bar.value = Math.round(f * 100); }).then((url) => {
    img.src = url;
    fig.classList.remove('loading');
    bar.remove();
    scrollToEnd(false);
  }, (e) => {
    fig.classList.remove('loading');
    bar.replaceWith(h('span', { class: 'error' }, `Image unavailable: ${e.message}`));
  });
  return fig;
}

function fileChip(m) {
  const bar = h('progress', { max: 100, value: 0, hidden: true, 'aria-label': `Downloading ${m.filename}` });
  const btn = h('button', { type: 'button', class: 'secondary' }, 'Download');
  btn.addEventListener('click', () => {
    btn.disabled = true;
    bar.hidden = false;
    app.media.url(m, (f) => { bar.value = Math.round(f * 100); }).then((url) => {
      bar.hidden = true;
      btn.disabled = false;
      const a = h('a', { href: url, download: m.filename || 'download' });
      document.body.append(a);
      a.click();
      a.remove();
    }, (e) => {
      bar.hidden = true;
      btn.disabled = false;
      toast(`${m.filename}: ${e.message}`, 'error');
    });
  });
  return h('div', { class: 'file-chip', dataset: { media: m.media_id } },
    h('span', { class: 'file-icon', 'aria-hidden': 'true' }, icon('file')), h('span', { class: 'att-name' }, m.filename || m.media_id),
    h('span', { class: 'att-size' }, formatBytes(m.size)), bar, btn);
}
