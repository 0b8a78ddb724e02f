// The cards of a turn's steps: commentary beats, the plan, tool calls and picker outcomes. Live
// frames (`commentary`, `tool.*`, `picker.*`) and an answer's `steps` from history draw the same
// cards, so a reload, a second browser and a device that never watched the turn show the same
// transcript. Pure DOM building: it imports only the markdown renderer, the file changes' blocks,
// icons, state and util.

import { changeBlock, changesBox } from './changes.js';
import { icon } from './icons.js';
import { markdown } from './markdown.js';
import { app } from './state.js';
import { h } from './util.js';

/** A commentary beat (or the plan's checklist) as its card. */
export function commentaryCard(id, text) {
  return h('div', { class: 'commentary', dataset: { id } }, h('div', { class: 'md' }, markdown(text)));
}

/**
 * An empty tool card for a call of `data` ({name, emoji, preview, args, ok?, duration?, output?,
 * changes?}).
 */
export function toolCard(key, data) {
  const card = h('details', { class: 'tool running', dataset: { id: key, tool: data.name } });
  card.summary = h('summary', {});
  card.changes = h('div', { class: 'tool-changes', hidden: true });
  card.body = h('div', { class: 'tool-body' });
  card.append(card.summary, card.changes, card.body);
  card.data = data;
  return card;
}

/** Draws a tool card from its data: running, or ended ok or failed. */
export function fillToolCard(card) {
  const d = card.data;
  if (d.ok !== undefined) {
    card.classList.remove('running');
    card.classList.add(d.ok ? 'ok' : 'failed');
  }
  const state = d.ok === undefined ? h('span', { class: 'tool-state', 'aria-label': 'running' }, icon('hourglass'))
    : h('span', { class: 'tool-state', 'aria-label': d.ok ? 'succeeded' : 'failed' }, icon(d.ok ? 'check' : 'x'));
  card.summary.replaceChildren(...[
    h('span', { class: 'tool-emoji', 'aria-hidden': 'true' }, icon('wrench')),
    h('span', { class: 'tool-name' }, d.name),
    d.preview ? h('code', { class: 'tool-preview' }, d.preview) : null,
    Number.isFinite(d.duration) ? h('span', { class: 'tool-dur' }, `${d.duration.toFixed(1)} s`) : null,
    state,
  ].filter(Boolean));
  const body = [];
  if (d.args !== undefined && d.args !== null && app.settings.tools) body.push(h('div', { class: 'tool-label' }, 'Arguments'), h('pre', {}, JSON.stringify(d.args, null, 2)));
  if (d.note && d.ok === undefined) body.push(h('div', { class: 'tool-note' }, d.note));
  if (d.output) body.push(h('div', { class: 'tool-label' }, 'Output'), h('pre', {}, d.output));
  card.body.replaceChildren(...body);
  // The file changes are drawn once per list (a progress beat keeps an expanded diff as it is),
  // and open the card the first time they come: an edit is read, not looked up.
  if (card.shownChanges !== d.changes) {
    card.shownChanges = d.changes;
    const changes = Array.isArray(d.changes) ? d.changes : [];
    card.changes.replaceChildren(...changes.map(changeBlock));
    card.changes.hidden = !changes.length;
    if (changes.length && !card.openedForChanges) {
      card.openedForChanges = true;
      card.open = true;
    }
  }
}

/** The label of a picker's card, by its frame type or a step's `picker` kind. */
export const PICKER_LABEL = {
  approval: 'Approval requested',
  clarify: 'Question',
  model: 'Choose a model',
  confirm: 'Please confirm',
};

/** How a closed picker's card ends: `— you chose Allow once`, `— expired`, … */
export function pickerOutcomeText(outcome, { label, value, byDevice, mine } = {}) {
  if (outcome === 'expired') return 'expired';
  if (outcome === 'cancelled') return 'cancelled';
  const chosen = label || value;
  if (mine) return `you chose ${chosen}`;
  return chosen ? `answered elsewhere: ${chosen}` : 'answered elsewhere';
}

/** A settled picker card: what was asked, how it closed, and the file changes its approval showed. */
export function closedPickerCard(id, kind, title, how, changes) {
  const label = PICKER_LABEL[kind] || 'Choose';
  return h('div', { class: 'picker-card done', dataset: { id } },
    h('span', { class: 'picker-card-label' }, label, title ? `: ${title}` : ''),
    h('span', { class: 'picker-card-state' }, `— ${how}`),
    Array.isArray(changes) && changes.length ? changesBox(changes, 'picker-changes') : null);
}

/** The cards of an answer's `steps`, in order, each with the key it is kept under in its lane. */
export function stepCards(messageId, steps, myDevice) {
  return (steps || []).map((s, i) => {
    const key = `step:${messageId}:${i}`;
    switch (s.kind) {
      case 'commentary':
      case 'plan':
        return [key, commentaryCard(key, s.text || '')];
      case 'tool': {
        const card = toolCard(key, {
          name: s.name, emoji: s.emoji, preview: s.preview, args: s.args, ok: s.ok, duration: s.duration, output: s.output_preview,
          changes: s.changes,
        });
        fillToolCard(card);
        return [key, card];
      }
      case 'picker': {
        const how = s.outcome ? pickerOutcomeText(s.outcome, {
          label: s.label, value: s.value, byDevice: s.by_device, mine: !!s.by_device && s.by_device === myDevice,
        }) : 'not answered';
        return [key, closedPickerCard(key, s.picker, s.title, how, s.changes)];
      }
      default:
        return null;
    }
  }).filter(Boolean);
}
