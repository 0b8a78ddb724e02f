// Pickers: the agent's questions that wait for an answer (approval, clarify, model, choice and
// confirm frames). Each one gets a card in its lane and a row in the inbox (inbox.js), and is
// shown in the `#picker` dialog, one at a time, until it is answered here, or closed by the
// gateway (`picker.closed`: answered on another device, expired or cancelled), or made stale by
// the lane moving on (`closeStalePickers`, for gateways that do not send `picker.closed`; a
// `picker.closed` that comes after still writes the choice on the card). The dialog opens by
// itself only for a picker that arrived live (not replayed, not listed in `hello.ack`), and for
// a model or choice picker only on the device that asked for it (`for_device`); "Later" leaves a
// picker to the inbox. Answers go to the gateway as `picker.select`; a clarify question takes a
// typed answer only when it says `free_text`.

import { RequestError } from './conn.js';
import { $, app, laneOf, laneTitle, store } from './state.js';
import { changesBox } from './changes.js';
import { pickerOutcomeText } from './steps.js';
import { appendToLane } from './transcript.js';
import { toast } from './ui.js';
import { h } from './util.js';

/** Called whenever a picker opens or closes: the inbox redraws itself (inbox.js sets it). */
let pickersChanged = () => {};

/** Sets what runs whenever a picker opens or closes. */
export function onPickersChanged(fn) {
  pickersChanged = fn;
}

const CARD_LABEL = {
  'picker.approval': 'Approval requested',
  'picker.clarify': 'Question',
  'picker.model': 'Choose a model',
  'picker.confirm': 'Please confirm',
};

/**
 * Pickers settled as "answered elsewhere" because their lane moved on, by id: the
 * `picker.closed` that follows writes the choice on their card. Only the last few are kept.
 */
const settledStale = new Map();
const SETTLED_STALE_KEPT = 50;

/** Ids of the pickers open here when `hello.ack` came that it did not list: closed meanwhile. */
let goneAtHello = [];

export function initPickers() {
  $('picker').addEventListener('cancel', () => { laterPicker(); });
}

/** The kind of a picker as its card and the inbox name it: "Approval requested", "Question", … */
export function pickerLabel(frame) {
  return frame.type === 'picker.choice' ? frame.payload.title || 'Choose' : CARD_LABEL[frame.type] || 'Choose';
}

/**
 * The file changes an approval shows before its choices (an edit's diff, `changes` of
 * `picker.approval`), as the tool cards draw them; none for other pickers.
 */
function approvalChanges(frame) {
  const changes = frame.type === 'picker.approval' ? frame.payload.changes : null;
  return Array.isArray(changes) && changes.length ? changesBox(changes, 'picker-changes') : null;
}

/** A model or choice picker asked for by another device (`for_device`) does not open here. */
function askedHere(frame) {
  if (frame.type !== 'picker.model' && frame.type !== 'picker.choice') return true;
  const forDevice = frame.payload.for_device;
  return !forDevice || forDevice === store.getItem('iris.device_id');
}

/**
 * A `picker.*` frame: a card in its lane, a row in the inbox, and the dialog when the picker
 * arrived live, is for this device and no other picker is shown.
 */
export function onPicker(frame) {
  const p = frame.payload;
  if (frame.type === 'picker.closed') {
    onPickerClosed(p);
    return;
  }
  if (app.pickers.has(p.picker_id)) return;
  const lane = laneOf(frame);
  const entry = { frame, lane, state: 'open', autoOpen: !frame.replayed && askedHere(frame) };
  // A newer model or choice picker in the same lane replaces an older unanswered one.
  if (frame.type === 'picker.model' || frame.type === 'picker.choice') closeStalePickers(lane, [frame.type]);
  app.pickers.set(p.picker_id, entry);
  entry.card = h('div', { class: 'picker-card', dataset: { id: p.picker_id, kind: frame.type } },
    h('span', { class: 'picker-card-label' }, pickerLabel(frame), p.title && frame.type !== 'picker.choice' ? `: ${p.title}` : ''),
    h('button', { type: 'button', class: 'secondary', onclick: () => showPicker(p.picker_id) }, 'Answer'),
    approvalChanges(frame));
  appendToLane(lane, `picker:${p.picker_id}`, entry.card, frame);
  pickersChanged();
  if (!app.pickerShown && entry.autoOpen) showPicker(p.picker_id);
}

/**
 * `hello.ack.open_pickers`: the pickers still open when the connection started, each as a
 * replayed frame. They join the inbox without opening the dialog (a reloaded page's cursor is
 * past them). Pickers open here that the list leaves out were closed while away; those the
 * replay does not settle are settled by `settleGonePickers` once it ends. Absent (an older
 * gateway): nothing changes.
 */
export function onOpenPickers(list) {
  if (!Array.isArray(list)) {
    goneAtHello = [];
    return;
  }
  const open = new Set(list.map((f) => f.payload && f.payload.picker_id));
  goneAtHello = [...app.pickers.keys()].filter((id) => !open.has(id));
  for (const f of list) {
    if (f && f.payload && f.type && f.type.startsWith('picker.') && f.type !== 'picker.closed') onPicker({ ...f, replayed: true });
  }
}

/** After the replay: pickers that were closed while away and that it did not settle. */
export function settleGonePickers() {
  for (const id of goneAtHello) if (app.pickers.has(id) && !app.pickers.get(id).answering) settlePicker(id, 'closed while away');
  goneAtHello = [];
}

/** Settles the open pickers of a lane with one of `types` that are not being answered here. */
export function closeStalePickers(lane, types) {
  for (const [id, entry] of app.pickers) {
    if (entry.lane === lane && !entry.answering && types.includes(entry.frame.type)) {
      settlePicker(id, 'answered elsewhere');
      settledStale.set(id, entry);
      if (settledStale.size > SETTLED_STALE_KEPT) settledStale.delete(settledStale.keys().next().value);
    }
  }
}

/**
 * `picker.closed`: the gateway closed a picker; a card still open here settles with the outcome,
 * and one settled before as "answered elsewhere" now says what was chosen.
 */
function onPickerClosed(p) {
  const stale = settledStale.get(p.picker_id);
  if (stale) {
    settledStale.delete(p.picker_id);
    const state = stale.card && stale.card.querySelector('.picker-card-state');
    if (state) state.textContent = `— ${closedText(stale, p)}`;
    return;
  }
  const entry = app.pickers.get(p.picker_id);
  if (!entry || entry.answering) return;
  settlePicker(p.picker_id, closedText(entry, p));
}

/** How a `picker.closed` ends a picker's card: "you chose Allow once", "answered elsewhere: Deny", … */
function closedText(entry, p) {
  const choices = entry.frame.payload.choices || [];
  const choice = choices.find((c) => c.value === p.value);
  const mine = !!p.by_device && p.by_device === store.getItem('iris.device_id');
  return pickerOutcomeText(p.outcome, {
    label: choice && choice.label, value: p.value, byDevice: p.by_device, mine,
  });
}

function settlePicker(id, how) {
  const entry = app.pickers.get(id);
  if (!entry) return;
  app.pickers.delete(id);
  if (entry.card) {
    entry.card.classList.add('done');
    const btn = entry.card.querySelector(':scope > button');
    if (btn) btn.remove();
    // The outcome goes after the label, above the file changes the approval showed.
    entry.card.insertBefore(h('span', { class: 'picker-card-state' }, `— ${how}`), entry.card.querySelector(':scope > .picker-changes'));
  }
  pickersChanged();
  if (app.pickerShown === id) {
    app.pickerShown = null;
    $('picker').close();
    const next = [...app.pickers.entries()].find(([, e]) => e.autoOpen);
    if (next) showPicker(next[0]);
  }
}

/** "Later" (or Esc): the dialog closes and the picker waits in the inbox, not reopening by itself. */
function laterPicker() {
  const entry = app.pickers.get(app.pickerShown);
  if (entry) entry.autoOpen = false;
  app.pickerShown = null;
}

async function answerPicker(id, value, label) {
  const entry = app.pickers.get(id);
  if (!entry) return;
  const dialog = $('picker');
  for (const b of dialog.querySelectorAll('button, input')) b.disabled = true;
  entry.answering = true;
  try {
    await app.conn.request('picker.select', { picker_id: id, value });
    settlePicker(id, `you chose ${label || value}`);
  } catch (e) {
    if (e instanceof RequestError && e.code === 'not_found') settlePicker(id, 'already answered or expired');
    else {
      entry.answering = false;
      toast(`Could not answer: ${e.message}`, 'error');
      for (const b of dialog.querySelectorAll('button, input')) b.disabled = false;
    }
  }
}

export function showPicker(id) {
  const entry = app.pickers.get(id);
  if (!entry) return;
  const { frame, lane } = entry;
  const dialog = $('picker');
  app.pickerShown = id;
  const content = [
    h('div', { class: 'picker-lane' }, laneTitle(lane.chat_id, lane.thread_id)),
    ...pickerBody(id, frame),
  ];
  content.push(h('div', { class: 'dialog-actions' }, h('button', { type: 'button', class: 'secondary', onclick: () => { laterPicker(); dialog.close(); } }, 'Later')));
  dialog.replaceChildren(...content);
  if (!dialog.open) dialog.showModal();
  // The dialog says what an "Approval needed" toast of its lane said, and the toast would cover it.
  for (const t of $('toasts').querySelectorAll('.toast[data-picker-lane]')) {
    if (t.dataset.pickerLane === lane.key) t.remove();
  }
}

/** The title, details and answer controls of one picker, by kind. */
function pickerBody(id, frame) {
  const p = frame.payload;
  const choiceButtons = (choices) => h('div', { class: 'choices' }, choices.map((c) => h('button', {
    type: 'button',
    class: c.is_current ? 'choice current' : 'choice',
    'aria-current': c.is_current ? 'true' : false,
    dataset: { value: c.value },
    onclick: () => answerPicker(id, c.value, c.label),
  }, c.label, c.is_current ? ' (current)' : '')));
  const content = [];
  switch (frame.type) {
    case 'picker.approval': {
      content.push(h('h2', { id: 'picker-title' }, p.title || 'Allow this?'));
      // The edit's diff before the choices: read before Allow is pressed. The request's own text
      // (which repeats the changes, whole files before and after) then waits behind a summary.
      const changes = approvalChanges(frame);
      const preview = p.preview ? h('pre', { class: 'preview' }, p.preview) : null;
      if (preview && changes) content.push(h('details', { class: 'preview-more' }, h('summary', {}, 'Request as sent'), preview));
      else if (preview) content.push(preview);
      if (changes) content.push(changes);
      content.push(choiceButtons(p.choices || []));
      break;
    }
    case 'picker.clarify': {
      content.push(h('h2', { id: 'picker-title' }, p.title || 'The agent asks'));
      if (p.choices && p.choices.length) content.push(choiceButtons(p.choices));
      // A typed answer only where the agent takes one; otherwise only its choices.
      if (p.free_text) {
        const input = h('input', { type: 'text', 'aria-label': 'Your answer', placeholder: 'Or type an answer' });
        content.push(h('form', { class: 'free', onsubmit: (ev) => { ev.preventDefault(); if (input.value.trim()) answerPicker(id, input.value.trim()); } },
          input, h('button', { type: 'submit', class: 'primary' }, 'Answer')));
      }
      break;
    }
    case 'picker.model': {
      content.push(h('h2', { id: 'picker-title' }, 'Choose a model'));
      for (const prov of p.providers || []) {
        content.push(h('fieldset', { class: 'provider' }, h('legend', {}, prov.label || prov.id),
          choiceButtons((prov.models || []).map((m) => ({ value: m.id, label: m.label || m.id, is_current: m.id === p.current_model })))));
      }
      break;
    }
    case 'picker.confirm':
      content.push(h('h2', { id: 'picker-title' }, p.title || 'Confirm'));
      if (p.body) content.push(h('p', {}, p.body));
      content.push(choiceButtons([{ value: 'yes', label: 'Yes' }, { value: 'no', label: 'No' }]));
      break;
    default:
      content.push(h('h2', { id: 'picker-title' }, p.title || 'Choose'));
      content.push(choiceButtons(p.choices || []));
      break;
  }
  return content;
}
