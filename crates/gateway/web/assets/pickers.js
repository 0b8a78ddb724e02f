// Pickers: the agent's questions that wait for an answer (approval, clarify, model, choice and
// confirm frames). Each one gets a card in its lane and is shown in the `#picker` dialog, one at
// a time, until it is answered here, or closed by the gateway (`picker.closed`: answered on
// another device, expired or cancelled), or made stale by the lane moving on
// (`closeStalePickers`, for gateways that do not send `picker.closed`). Answers go to the gateway
// as `picker.select`; a clarify question takes a typed answer only when it says `free_text`.

import { RequestError } from './conn.js';
import { $, app, laneOf, laneTitle, store } from './state.js';
import { pickerOutcomeText } from './steps.js';
import { appendToLane } from './transcript.js';
import { toast } from './ui.js';
import { h } from './util.js';

const CARD_LABEL = {
  'picker.approval': 'Approval requested',
  'picker.clarify': 'Question',
  'picker.model': 'Choose a model',
  'picker.confirm': 'Please confirm',
};

export function initPickers() {
  $('picker').addEventListener('cancel', () => { app.pickerShown = null; });
}

/** A `picker.*` frame: a card in its lane, and the dialog when no other picker is shown. */
export function onPicker(frame) {
  const p = frame.payload;
  if (frame.type === 'picker.closed') {
    onPickerClosed(p);
    return;
  }
  if (app.pickers.has(p.picker_id)) return;
  const lane = laneOf(frame);
  const entry = { frame, lane, state: 'open' };
  // A newer model or choice picker in the same lane replaces an older unanswered one.
  if (frame.type === 'picker.model' || frame.type === 'picker.choice') closeStalePickers(lane, [frame.type]);
  app.pickers.set(p.picker_id, entry);
  const label = frame.type === 'picker.choice' ? p.title || 'Choose' : CARD_LABEL[frame.type] || 'Choose';
  entry.card = h('div', { class: 'picker-card', dataset: { id: p.picker_id, kind: frame.type } },
    h('span', { class: 'picker-card-label' }, label, p.title && frame.type !== 'picker.choice' ? `: ${p.title}` : ''),
    h('button', { type: 'button', class: 'secondary', onclick: () => showPicker(p.picker_id) }, 'Answer'));
  appendToLane(lane, `picker:${p.picker_id}`, entry.card, frame);
  if (!app.pickerShown) showPicker(p.picker_id);
}

/** Settles the open pickers of a lane with one of `types` that are not being answered here. */
export function closeStalePickers(lane, types) {
  for (const [id, entry] of app.pickers) {
    if (entry.lane === lane && !entry.answering && types.includes(entry.frame.type)) settlePicker(id, 'answered elsewhere');
  }
}

/** `picker.closed`: the gateway closed a picker; a card still open here settles with the outcome. */
function onPickerClosed(p) {
  const entry = app.pickers.get(p.picker_id);
  if (!entry || entry.answering) return;
  const choices = entry.frame.payload.choices || [];
  const choice = choices.find((c) => c.value === p.value);
  const mine = !!p.by_device && p.by_device === store.getItem('iris.device_id');
  settlePicker(p.picker_id, pickerOutcomeText(p.outcome, {
    label: choice && choice.label, value: p.value, byDevice: p.by_device, mine,
  }));
}

function settlePicker(id, how) {
  const entry = app.pickers.get(id);
  if (!entry) return;
  app.pickers.delete(id);
  if (entry.card) {
    entry.card.classList.add('done');
    const btn = entry.card.querySelector('button');
    if (btn) btn.remove();
    entry.card.append(h('span', { class: 'picker-card-state' }, `— ${how}`));
  }
  if (app.pickerShown === id) {
    app.pickerShown = null;
    $('picker').close();
    const next = [...app.pickers.keys()][0];
    if (next) showPicker(next);
  }
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

function showPicker(id) {
  const entry = app.pickers.get(id);
  if (!entry) return;
  const { frame, lane } = entry;
  const dialog = $('picker');
  app.pickerShown = id;
  const content = [
    h('div', { class: 'picker-lane' }, laneTitle(lane.chat_id, lane.thread_id)),
    ...pickerBody(id, frame),
  ];
  content.push(h('div', { class: 'dialog-actions' }, h('button', { type: 'button', class: 'secondary', onclick: () => { app.pickerShown = null; dialog.close(); } }, 'Later')));
  dialog.replaceChildren(...content);
  if (!dialog.open) dialog.showModal();
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
    case 'picker.approval':
      content.push(h('h2', { id: 'picker-title' }, p.title || 'Allow this?'));
      if (p.preview) content.push(h('pre', { class: 'preview' }, p.preview));
      content.push(choiceButtons(p.choices || []));
      break;
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
