// The changes of a turn: every file the turn's tools changed, gathered from its tool cards (the
// cards drawn above its answer, live or from history), with a line under the answer ("2 files
// changed +5 −1") that opens them in the `#turn-changes` dialog: each file once, under its path
// with the turn's counts. A file changed once shows its one diff, which is the turn's change to
// it. A file changed more than once shows the one diff from before the turn to after it when the
// gateway could combine the edits (the answer's `turn_changes`), with its edits one by one
// folded under it ("Each edit (2)"); otherwise each of its diffs in the order they were made
// ("Edit 1 of 2"). On a wide screen the diffs stand side by side (the old text left, the new
// right); "Side by side" switches.

import { changeBlock } from './changes.js';
import { icon } from './icons.js';
import { $ } from './state.js';
import { h } from './util.js';

/**
 * The file changes of the turn `answer` ends: from the tool cards above it, back to its prompt,
 * each file with its turn's change when the answer has one (`combined`).
 */
export function turnChanges(answer) {
  const cards = [];
  for (let el = answer.previousElementSibling; el; el = el.previousElementSibling) {
    if (el.matches('.msg')) break;
    if (el.matches('details.tool')) cards.unshift(el);
  }
  const files = new Map();
  const file = (path) => {
    if (!files.has(path)) files.set(path, { path, changes: [], added: 0, removed: 0, combined: null });
    return files.get(path);
  };
  for (const card of cards) {
    const changes = card.data && Array.isArray(card.data.changes) ? card.data.changes : [];
    for (const c of changes) {
      const f = file(String(c.path || ''));
      f.changes.push(c);
      f.added += Number(c.added) || 0;
      f.removed += Number(c.removed) || 0;
    }
  }
  for (const c of Array.isArray(answer.turnChanges) ? answer.turnChanges : []) {
    const f = file(String(c.path || ''));
    f.combined = c;
    f.added = Number(c.added) || 0;
    f.removed = Number(c.removed) || 0;
  }
  return [...files.values()];
}

/**
 * Puts (or refreshes) the line under a complete answer that opens its turn's changes;
 * `combined` is the answer's `turn_changes`, when the frame that completed it had them.
 */
export function noteTurnChanges(answer, combined) {
  if (!answer) return;
  if (Array.isArray(combined)) answer.turnChanges = combined;
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
    const edits = f.changes.map((c, i) => {
      const block = changeBlock(c, { split });
      return f.changes.length > 1 ? withHint(block, `Edit ${i + 1} of ${f.changes.length}`) : block;
    });
    const blocks = f.combined
      ? [
        withHint(changeBlock(f.combined, { split }), `${f.changes.length} edits combined: from before the turn to after it`),
        h('details', { class: 'turn-edits' }, h('summary', {}, `Each edit (${f.changes.length})`), ...edits),
      ]
      : edits;
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

/** `block` with a line of `hint` above its diff. */
function withHint(block, hint) {
  block.prepend(h('div', { class: 'settings-hint' }, hint));
  return block;
}
