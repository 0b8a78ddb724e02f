// Small shared widgets used by several views: toasts (at the bottom, above the composer), requests whose failure is reported as a
// toast, popup menus anchored to a button (closed by `closePopups`), and the two modal questions
// of the `#ask` dialog (a one-line text answer and a yes/no confirmation). It knows nothing about
// chats or messages; it imports only state.js and util.js.

import { $, app } from './state.js';
import { h } from './util.js';

/**
 * A short message at the bottom of the page, just above the composer and whatever sits on it
 * (the busy bar, the attachments), so that it never hides the top bar, its menu or a dialog.
 * Returns it (it removes itself after a few seconds, or when clicked).
 */
export function toast(text, kind = 'info', title) {
  const el = h('div', { class: `toast ${kind}` }, title ? h('strong', {}, title) : null, title ? h('br') : null, text);
  el.addEventListener('click', () => el.remove());
  const box = $('toasts');
  const scroller = $('scroller').getBoundingClientRect();
  box.style.bottom = `${scroller.height ? Math.max(12, window.innerHeight - scroller.bottom + 12) : 16}px`;
  box.append(el);
  setTimeout(() => el.remove(), kind === 'error' ? 8000 : 6000);
  return el;
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

/** The button of the popup menu that is open, if any. */
let popupAnchor = null;

export function closePopups() {
  document.querySelectorAll('.popup').forEach((m) => m.remove());
  if (popupAnchor) popupAnchor.setAttribute('aria-expanded', 'false');
  popupAnchor = null;
}

/**
 * A menu of `[label, action, {checked}?]` items below `anchor`. Arrow keys move through it; Esc,
 * Tab or a choice closes it, and Esc gives the focus back to `anchor`.
 */
export function popupMenu(anchor, items) {
  closePopups();
  const close = () => closePopups();
  const menu = h('div', { class: 'menu popup', role: 'menu' }, items.map(([label, fn, opts]) => h('button', {
    type: 'button',
    role: opts && 'checked' in opts ? 'menuitemcheckbox' : 'menuitem',
    'aria-checked': opts && 'checked' in opts ? String(opts.checked) : false,
    onclick: () => { close(); anchor.focus(); fn(); },
  }, label)));
  document.body.append(menu);
  popupAnchor = anchor;
  anchor.setAttribute('aria-expanded', 'true');
  const r = anchor.getBoundingClientRect();
  const below = r.bottom + 4 + menu.offsetHeight <= window.innerHeight - 8;
  const top = below ? r.bottom + 4 : r.top - 4 - menu.offsetHeight;
  menu.style.top = `${Math.max(8, top)}px`;
  menu.style.left = `${Math.max(8, Math.min(r.right - menu.offsetWidth, window.innerWidth - menu.offsetWidth - 8))}px`;
  menu.querySelector('button').focus();
  menuKeys(menu, () => {
    close();
    anchor.focus();
  });
  menu.addEventListener('focusout', (ev) => {
    if (menu.isConnected && !menu.contains(ev.relatedTarget) && ev.relatedTarget) close();
  });
}

/** Keyboard of a menu: arrows, Home and End move the focus through its items, Esc calls `close`. */
export function menuKeys(menu, close) {
  menu.addEventListener('keydown', (ev) => {
    const items = [...menu.querySelectorAll('[role^=menuitem]')].filter((b) => !b.hidden);
    const at = items.indexOf(document.activeElement);
    const go = { ArrowDown: at + 1, ArrowUp: at - 1 + items.length, Home: 0, End: items.length - 1 }[ev.key];
    if (go !== undefined && items.length) {
      ev.preventDefault();
      items[go % items.length].focus();
    } else if (ev.key === 'Escape') {
      ev.preventDefault();
      ev.stopPropagation();
      close();
    } else if (ev.key === 'Tab') close();
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

/**
 * A form in the `#ask` dialog: a name field (when `name` is given) and a choice among `options`
 * (`[value, label]`, when there are any). Resolves with `{name, choice}`, or null when cancelled.
 */
export function askForm(title, { name, nameLabel = 'Name', options = [], choice, choiceLabel = 'Choice' }) {
  const dialog = $('ask');
  const field = name === undefined ? null : h('input', { type: 'text', value: name, 'aria-label': nameLabel, maxlength: 100, required: true });
  const select = options.length ? h('select', { 'aria-label': choiceLabel, class: 'ask-choice' },
    options.map(([v, l]) => h('option', { value: v, selected: v === choice }, l))) : null;
  return new Promise((resolve) => {
    let result = null;
    const form = h('form', { method: 'dialog' },
      h('h2', { id: 'ask-title' }, title),
      field ? h('label', { class: 'ask-label' }, nameLabel, field) : null,
      select ? h('label', { class: 'ask-label' }, choiceLabel, select) : null,
      h('div', { class: 'dialog-actions' },
        h('button', { type: 'button', class: 'secondary', onclick: () => dialog.close('') }, 'Cancel'),
        h('button', { type: 'submit', class: 'primary', value: 'ok' }, 'OK')));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const text = field ? field.value.trim() : '';
      if (field && !text) return;
      result = { name: text, choice: select ? select.value : null };
      dialog.close('ok');
    });
    dialog.replaceChildren(form);
    dialog.onclose = () => resolve(result);
    dialog.returnValue = '';
    dialog.showModal();
    (field || select).focus();
  });
}
