// The changes of a turn: every file the turn's tools changed, gathered from its tool cards (the
// cards drawn above its answer, live or from history), with a line under the answer ("2 files
// changed +5 −1") that opens them in the `#turn-changes` dialog: each file once, under its path
// with the turn's total counts, then each of its diffs in the order they were made ("Edit 1 of
// 2"). A file changed once shows its one diff, which is the turn's change to it. On a wide screen
// the diffs stand side by side (the old text left, the new right); "Side by side" switches.

import { changeBlock } from './changes.js';
import { icon } from './icons.js';
import { $ } from './state.js';
import { h } from './util.js';

/** The file changes of the turn `answer` ends: from the tool cards above it, back to its prompt. */
export function turnChanges(answer) {
  const cards = [];
  for (let el = answer.previousElementSibling; el; el = el.previousElementSibling) {
    if (el.matches('.msg')) break;
    if (el.matches('details.tool')) cards.unshift(el);
  }
  const files = new Map();
  for (const card of cards) {
    const changes = card.data && Array.isArray(card.data.changes) ? card.data.changes : [];
    for (const c of changes) {
      const path = String(c.path || '');
      if (!files.has(path)) files.set(path, { path, changes: [], added: 0, removed: 0 });
      const f = files.get(path);
      f.changes.push(c);
      f.added += Number(c.added) || 0;
      f.removed += Number(c.removed) || 0;
    }
  }
  return [...files.values()];
}

/** Puts (or refreshes) the line under a complete answer that opens its turn's changes. */
export function noteTurnChanges(answer) {
  const old = answer.querySelector(':scope > .turn-changes');
  if (old) old.remove();
  if (!answer.matches('.role-assistant:not(.streaming)')) return;
  const files = turnChanges(answer);
  if (!files.length) return;
  const added = files.reduce((n, f) => n + f.added, 0);
  const removed = files.reduce((n, f) => n + f.removed, 0);
  const words = `${files.length} ${files.length === 1 ? 'file' : 'files'} changed`;
  const line = h('button', {
    type: 'button',
    class: 'turn-changes',
    'aria-haspopup': 'dialog',
    onclick: () => showTurnChanges(answer),
  }, words, ' ', h('span', { class: 'change-added' }, `+${added}`), ' ', h('span', { class: 'change-removed' }, `\u2212${removed}`));
  const meta = answer.querySelector(':scope > .meta');
  answer.insertBefore(line, meta);
}

/** Whether diffs show side by side: on a wide screen unless the person chose otherwise. */
const WIDE = '(min-width: 1000px)';
let splitChosen = null;

/** Opens the dialog of the changes of the turn `answer` ends. */
export function showTurnChanges(answer) {
  const files = turnChanges(answer);
  const dialog = $('turn-changes');
  const split = splitChosen ?? window.matchMedia(WIDE).matches;
  const list = files.map((f) => {
    const blocks = f.changes.map((c, i) => {
      const block = changeBlock(c, { split });
      if (f.changes.length > 1) block.prepend(h('div', { class: 'settings-hint' }, `Edit ${i + 1} of ${f.changes.length}`));
      return block;
    });
    return h('section', { class: 'turn-file' },
      h('h3', { class: 'turn-file-head', title: f.path }, f.path,
        ' ', h('span', { class: 'change-added' }, `+${f.added}`), ' ', h('span', { class: 'change-removed' }, `\u2212${f.removed}`)),
      ...blocks);
  });
  dialog.replaceChildren(
    h('div', { class: 'settings-head' },
      h('h2', { id: 'turn-changes-title' }, `Changes of this turn (${files.length} ${files.length === 1 ? 'file' : 'files'})`),
      h('button', { type: 'button', class: 'icon', 'aria-label': 'Close changes', onclick: () => dialog.close() }, icon('x'))),
    h('button', {
      type: 'button',
      class: 'secondary turn-layout',
      'aria-pressed': String(split),
      onclick: () => {
        splitChosen = !split;
        showTurnChanges(answer);
      },
    }, 'Side by side'),
    ...list,
  );
  if (!dialog.open) dialog.showModal();
}
