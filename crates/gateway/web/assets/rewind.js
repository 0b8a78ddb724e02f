// Regenerate and edit (docs/protocol.md §7 "Regenerate and edit"): where the chat's agent can
// take its newest turn back (the answer's `runtime.rewind`), that answer offers Regenerate (its
// Retry regenerates it when it did not complete: the agent forgets the failed try) and the
// message it answers offers Edit, while the chat is idle and nothing was sent after it. Edit
// puts the message's text in the message box with a bar that says so (Cancel, or Esc, leaves
// it); Send then sends the edit (`message.send {edit_of}`). What was taken back stays in the
// transcript, dimmed and marked "Replaced" (`state: replaced`), on every device.
//
// The offer is worked out when it is shown (a menu opens, a message is hovered or focused): a
// newer message, a turn that runs or another device's regenerate changes it at any time, and the
// gateway refuses what is no longer the newest turn (shown as a toast). Attachments of an edited
// message are not sent again with the edit.

import { $, app, currentLane } from './state.js';
import { request } from './ui.js';
import { h } from './util.js';

const input = $('composer-input');

/** The user message an answer answered: its `reply_to`, else the nearest user message above it. */
export function promptOf(lane, el) {
  if (el.dataset.replyTo) return el.dataset.replyTo;
  const users = [...lane.el.querySelectorAll('.msg.role-user')];
  const above = users.filter((u) => u.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING);
  const last = above.pop();
  return last ? last.dataset.id : null;
}

/**
 * The answer of `lane` that can be taken back now: its newest, when its runtime says so, it was
 * not replaced, the lane is idle and no user message came after it. Null otherwise.
 */
function takeBackable(lane) {
  if (lane.busy || lane.stream) return null;
  const all = [...lane.el.querySelectorAll('.msg.role-assistant, .msg.role-user')];
  const last = all[all.length - 1];
  if (!last || !last.matches('.role-assistant:not(.streaming)')) return null;
  return last.dataset.rewind === '1' && last.dataset.state !== 'replaced' ? last : null;
}

/** What `el` (a message of `lane`) offers to take back: `[label, action]` menu items. */
export function rewindItems(lane, el) {
  const answer = takeBackable(lane);
  if (!answer) return [];
  const incomplete = answer.dataset.ended && answer.dataset.ended !== 'completed';
  if (el === answer) return [[incomplete ? 'Retry' : 'Regenerate', () => regenerate(lane, answer)]];
  const prompt = promptOf(lane, answer);
  if (el.matches('.role-user') && prompt && el.dataset.id === prompt && el.dataset.text) {
    return [['Edit', () => startEdit(lane, el)]];
  }
  return [];
}

/** The quick-action buttons of a message that may offer Regenerate or Edit (hidden until then). */
export function rewindButtons(lane, el, m) {
  if (m.role === 'assistant' && m.runtime && m.runtime.rewind) {
    return [h('button', { type: 'button', class: 'rewind', hidden: true, onclick: () => regenerate(lane, el) }, 'Regenerate')];
  }
  if (m.role === 'user' && m.text) {
    return [h('button', { type: 'button', class: 'rewind', hidden: true, onclick: () => startEdit(lane, el) }, 'Edit')];
  }
  return [];
}

/**
 * Shows the quick Regenerate or Edit of `el` when it is on offer now (as it is hovered or
 * focused). An answer that did not complete keeps its Retry, which then regenerates it.
 */
export function syncRewindButtons(lane, el) {
  const button = el.querySelector(':scope > .msg-actions > .rewind');
  if (!button) return;
  const [item] = rewindItems(lane, el);
  button.hidden = !item;
  if (item) button.textContent = item[0];
  const retry = el.querySelector(':scope > .msg-actions > .retry');
  if (retry) retry.hidden = !button.hidden;
}

/** Runs the newest answer's message again from before it (the agent forgets the first try). */
function regenerate(lane, answer) {
  const prompt = promptOf(lane, answer);
  if (prompt) request('message.retry', { message_id: prompt, rewind: true }, lane);
}

/** The message being edited (`{lane, id}`), or null. */
let editing = null;

function startEdit(lane, el) {
  editing = { lane, id: el.dataset.id };
  input.value = el.dataset.text;
  input.dispatchEvent(new Event('input'));
  $('editing').hidden = false;
  input.focus();
  input.setSelectionRange(input.value.length, input.value.length);
}

/** Leaves editing; `keepText` leaves what is typed in the box. */
export function cancelEdit(keepText = false) {
  if (!editing) return;
  editing = null;
  $('editing').hidden = true;
  if (!keepText) {
    input.value = '';
    input.dispatchEvent(new Event('input'));
  }
}

/**
 * The message a send from the box replaces (its id), when an edit is open in the lane shown;
 * the edit is over then. An edit of another lane ends when that lane is no longer shown.
 */
export function takeEdit() {
  if (!editing) return null;
  const id = editing.lane === currentLane() ? editing.id : null;
  cancelEdit(true);
  return id;
}

/** The lane shown changed: an edit begun in another lane ends, its text left out of the box. */
export function laneShown() {
  if (editing && app.current && editing.lane !== currentLane()) cancelEdit();
}

export function initRewind() {
  $('cancel-edit').addEventListener('click', () => {
    cancelEdit();
    input.focus();
  });
  input.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape' && editing && $('drawer').hidden) cancelEdit();
  });
}
