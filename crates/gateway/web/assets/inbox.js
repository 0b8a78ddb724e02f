// The inbox: every open picker (approval, question, model or other choice) of every chat, thread
// and agent in one list, so that nothing waiting for an answer is missed, whichever chat is shown
// and whether or not its dialog opened by itself. The top bar's `#open-inbox` button shows how
// many wait (hidden when none), and so does the tab title (view.js); the `#inbox` dialog lists
// them in order of arrival, each with its chat, its kind and title, and an "Answer" button that
// opens the picker's own dialog (pickers.js). The list follows `app.pickers` while it is open.

import { onPickersChanged, pickerLabel, showPicker } from './pickers.js';
import { $, app, laneTitle } from './state.js';
import { renderTitle } from './transcript.js';
import { h } from './util.js';

export function initInbox() {
  $('open-inbox').addEventListener('click', openInbox);
  onPickersChanged(renderInbox);
  renderInbox();
}

/** The open pickers in order of arrival: by cursor, those without one in the order they came. */
function waiting() {
  const list = [...app.pickers.entries()].map(([id, entry], i) => ({ id, entry, i }));
  const at = (x) => (Number.isFinite(Number(x.entry.frame.cursor)) ? Number(x.entry.frame.cursor) : Infinity);
  return list.sort((a, b) => at(a) - at(b) || a.i - b.i);
}

/** Brings the button, the tab title and (when open) the list in line with the open pickers. */
function renderInbox() {
  const n = app.pickers.size;
  const button = $('open-inbox');
  button.hidden = n === 0;
  button.setAttribute('aria-label', `Waiting for you: ${n}`);
  button.querySelector('.inbox-count').textContent = String(n);
  const dialog = $('inbox');
  if (dialog.open) fillInbox(dialog);
  renderTitle();
}

function openInbox() {
  const dialog = $('inbox');
  fillInbox(dialog);
  if (!dialog.open) dialog.showModal();
  const first = dialog.querySelector('.inbox-item button');
  if (first) first.focus();
}

function fillInbox(dialog) {
  const items = waiting().map(({ id, entry }) => {
    const { frame, lane } = entry;
    const p = frame.payload;
    const what = frame.type === 'picker.choice' || !p.title ? pickerLabel(frame) : `${pickerLabel(frame)}: ${p.title}`;
    return h('li', { class: 'inbox-item', dataset: { id, kind: frame.type } },
      h('div', { class: 'inbox-text' },
        h('span', { class: 'inbox-lane' }, laneTitle(lane.chat_id, lane.thread_id)),
        h('span', { class: 'inbox-what' }, what)),
      h('button', {
        type: 'button',
        class: 'primary',
        onclick: () => {
          dialog.close();
          showPicker(id);
        },
      }, 'Answer'));
  });
  dialog.replaceChildren(
    h('h2', { id: 'inbox-title' }, 'Waiting for you'),
    items.length ? h('ol', { class: 'inbox-list' }, items) : h('p', { class: 'inbox-empty' }, 'Nothing is waiting for you.'),
    h('div', { class: 'dialog-actions' }, h('button', { type: 'button', class: 'secondary', onclick: () => dialog.close() }, 'Close')),
  );
}
