// Small shared widgets used by several views: toasts, requests whose failure is reported as a
// toast, popup menus anchored to a button (closed by `closePopups`), and the two modal questions
// of the `#ask` dialog (a one-line text answer and a yes/no confirmation). It knows nothing about
// chats or messages; it imports only state.js and util.js.

import { $, app } from './state.js';
import { h } from './util.js';

export function toast(text, kind = 'info', title) {
  const el = h('div', { class: `toast ${kind}` }, title ? h('strong', {}, title) : null, title ? h('br') : null, text);
  el.addEventListener('click', () => el.remove());
  $('toasts').append(el);
  setTimeout(() => el.remove(), kind === 'error' ? 8000 : 6000);
}

/** A request whose failure is shown as a toast; resolves with the response or null. */
export async function request(type, payload, lane = {}, opts = {}) {
  try {
    return await app.conn.request(type, payload, { chat_id: lane.chat_id, thread_id: lane.thread_id });
  } catch (e) {
    if (!opts.quiet) toast(e.code === 'disconnected' ? 'Not connected. Try again when the connection is back.' : e.message, 'error');
    return null;
  }
}

export function closePopups() {
  document.querySelectorAll('.popup').forEach((m) => m.remove());
}

/** A menu of `[label, action]` items below `anchor`. */
export function popupMenu(anchor, items) {
  closePopups();
  const menu = h('div', { class: 'menu popup', role: 'menu' }, items.map(([label, fn]) => h('button', {
    type: 'button', role: 'menuitem', onclick: () => { menu.remove(); fn(); },
  }, label)));
  document.body.append(menu);
  const r = anchor.getBoundingClientRect();
  const top = Math.min(r.bottom + 4, window.innerHeight - menu.offsetHeight - 8);
  menu.style.top = `${Math.max(8, top)}px`;
  menu.style.left = `${Math.max(8, Math.min(r.right - menu.offsetWidth, window.innerWidth - menu.offsetWidth - 8))}px`;
  menu.querySelector('button').focus();
  menu.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape') {
      menu.remove();
      anchor.focus();
    }
  });
}

/** Asks for one line of text; resolves with it, or '' when cancelled. */
export function ask(title, label, value) {
  const dialog = $('ask');
  const field = h('input', { type: 'text', value, 'aria-label': label, maxlength: 100, required: true });
  return new Promise((resolve) => {
    const form = h('form', { method: 'dialog' },
      h('h2', { id: 'ask-title' }, title),
      field,
      h('div', { class: 'dialog-actions' },
        h('button', { type: 'button', class: 'secondary', onclick: () => dialog.close('') }, 'Cancel'),
        h('button', { type: 'submit', class: 'primary', value: 'ok' }, 'OK')));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      dialog.close(field.value.trim());
    });
    dialog.replaceChildren(form);
    dialog.onclose = () => resolve(dialog.returnValue);
    dialog.returnValue = '';
    dialog.showModal();
    field.select();
  });
}

/** Asks to confirm `action`; resolves with true or false. */
export function confirmDialog(title, text, action) {
  const dialog = $('ask');
  return new Promise((resolve) => {
    dialog.replaceChildren(
      h('h2', { id: 'ask-title' }, title),
      h('p', {}, text),
      h('div', { class: 'dialog-actions' },
        h('button', { type: 'button', class: 'secondary', onclick: () => dialog.close('') }, 'Cancel'),
        h('button', { type: 'button', class: 'danger', onclick: () => dialog.close('yes') }, action)),
    );
    dialog.onclose = () => resolve(dialog.returnValue === 'yes');
    dialog.returnValue = '';
    dialog.showModal();
  });
}
