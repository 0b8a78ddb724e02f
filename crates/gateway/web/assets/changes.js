// A list of file changes ({path, diff, added, removed, new_file?, truncated?, outside?}), as a tool card
// and an approval show them: each file's name with its `+N −M` counts, and its diff coloured by
// highlight.js, collapsed beyond a few lines. The file's name opens it in the Files view (set by
// `setFileOpener`: the gateway takes a tool call's absolute path inside the agent's directory).
// Pure DOM building: it imports only code highlighting and util.

import { highlightBlock } from './code.js';
import { h } from './util.js';

/** Lines of a diff shown before its "Show all N lines" button. */
export const DIFF_PREVIEW_LINES = 12;

/** What opens a changed file by its path (the Files view), or null. */
let openFile = null;

/** Sets what a file's name opens it with (`(path) => …`). */
export function setFileOpener(open) {
  openFile = open;
}

/** `2 lines added, 1 removed`: the counts as words. */
export function changeCountsLabel(added, removed) {
  return `${added} ${added === 1 ? 'line' : 'lines'} added, ${removed} removed`;
}

/**
 * The lines of a unified diff as shown under its file's name: its `---`/`+++` headers (the path,
 * already in the name line) left out, from the first hunk on.
 */
export function diffLines(diff) {
  const lines = String(diff || '').replace(/\n$/, '').split('\n');
  const hunk = lines.findIndex((l) => l.startsWith('@@'));
  const head = hunk < 0 ? 0 : hunk;
  const shown = lines.slice(0, head).filter((l) => !l.startsWith('--- ') && !l.startsWith('+++ ')).concat(lines.slice(head));
  return shown.length === 1 && shown[0] === '' ? [] : shown;
}

/**
 * The rows of a unified diff side by side: `{hunk}` for a hunk's header, else `{left, right}`,
 * each `{n, text, kind}` or null (`kind`: `same`, `del`, `add`). Removed lines pair with the
 * added lines that follow them, in order; a context line stands on both sides.
 */
export function splitRows(lines) {
  const rows = [];
  let [oldN, newN] = [0, 0];
  let dels = [];
  let adds = [];
  const flush = () => {
    for (let i = 0; i < Math.max(dels.length, adds.length); i++) rows.push({ left: dels[i] || null, right: adds[i] || null });
    [dels, adds] = [[], []];
  };
  for (const line of lines) {
    const hunk = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(line);
    if (hunk) {
      flush();
      [oldN, newN] = [Number(hunk[1]), Number(hunk[2])];
      rows.push({ hunk: line });
    } else if (line.startsWith('-')) {
      dels.push({ n: oldN++, text: line.slice(1), kind: 'del' });
    } else if (line.startsWith('+')) {
      adds.push({ n: newN++, text: line.slice(1), kind: 'add' });
    } else if (!line.startsWith('\\')) {
      flush();
      const text = line.slice(1);
      rows.push({ left: { n: oldN++, text, kind: 'same' }, right: { n: newN++, text, kind: 'same' } });
    }
  }
  flush();
  return rows;
}

/** A diff's lines side by side: the old file on the left, the new one on the right. */
function splitDiff(lines, name) {
  const cell = (side) => (side
    ? [h('span', { class: `split-n split-${side.kind}` }, String(side.n)), h('span', { class: `split-text split-${side.kind}` }, side.text)]
    : [h('span', { class: 'split-n split-none' }), h('span', { class: 'split-text split-none' })]);
  const rows = splitRows(lines).map((r) => (r.hunk
    ? h('div', { class: 'split-hunk' }, r.hunk)
    : h('div', { class: 'split-row' }, ...cell(r.left), ...cell(r.right))));
  return h('div', { class: 'split-diff', tabindex: '0', role: 'region', 'aria-label': `Diff of ${name}, side by side` }, ...rows);
}

/**
 * One file change ({path, diff, added, removed, new_file?, truncated?}): its name line and diff;
 * with `split`, the diff side by side and whole.
 */
export function changeBlock(change, { split = false } = {}) {
  const path = String(change.path || '');
  const name = path.split(/[\\/]/).filter(Boolean).pop() || path;
  const added = Number(change.added) || 0;
  const removed = Number(change.removed) || 0;
  // Every string here is the agent's and goes in as text (`h` makes text nodes), never markup.
  const box = h('div', { class: 'change', dataset: { path } }, h('div', { class: 'change-head' },
    openFile && path && !change.outside
      ? h('button', { type: 'button', class: 'link change-file', title: path, 'aria-label': `Open ${name}`, onclick: () => openFile(path) }, name)
      : h('span', { class: 'change-file', title: path }, name),
    change.new_file ? h('span', { class: 'change-new' }, 'new file') : null,
    change.outside ? h('span', { class: 'change-outside', title: path }, "outside the agent's folder") : null,
    h('span', { class: 'change-counts', role: 'img', 'aria-label': changeCountsLabel(added, removed) },
      h('span', { class: 'change-added' }, `+${added}`), ' ', h('span', { class: 'change-removed' }, `\u2212${removed}`))));
  const lines = diffLines(change.diff);
  if (lines.length && split) {
    box.append(splitDiff(lines, name));
  } else if (lines.length) {
    // The text goes in as text; code.js colours it with highlight.js's class-only spans.
    const code = h('code', { class: 'language-diff' });
    // Long lines scroll sideways inside the block: reachable and scrollable by keyboard.
    const pre = h('pre', { class: 'change-diff', tabindex: '0', role: 'region', 'aria-label': `Diff of ${name}` }, code);
    const show = (all) => {
      code.textContent = (all ? lines : lines.slice(0, DIFF_PREVIEW_LINES)).join('\n');
      highlightBlock(code, 'diff');
    };
    show(lines.length <= DIFF_PREVIEW_LINES);
    box.append(pre);
    if (lines.length > DIFF_PREVIEW_LINES) {
      const more = h('button', {
        type: 'button',
        class: 'change-more',
        onclick: () => {
          show(true);
          more.remove();
          pre.focus();
        },
      }, `Show all ${lines.length} lines`);
      box.append(more);
    }
  }
  if (change.truncated) box.append(h('div', { class: 'change-note' }, lines.length ? 'Diff cut short' : 'Too large to show'));
  return box;
}

/**
 * The blocks of `changes` in a box of `className` (hidden when there are none); `changes` that is
 * not a list counts as none.
 */
export function changesBox(changes, className) {
  const list = Array.isArray(changes) ? changes : [];
  const box = h('div', { class: className, hidden: !list.length });
  box.append(...list.map(changeBlock));
  return box;
}
