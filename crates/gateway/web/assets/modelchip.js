// The model chip in the top bar: the agent and model of the chat shown, taken from the chat's
// newest message that carries a runtime (an answer, or the gateway's note that the chat's model
// or agent changed). A tap offers "Choose a model…" (the agent's model picker, opened on this
// device only, as `/model` does) and, when the gateway has several agents, the chat's agent;
// above them, what the chat has used so far (`usage`: its answers, tokens and cost).

import { keep, newClientId, trySend } from './outbox.js';
import { $, app, currentLane } from './state.js';
import { popupMenu, request, toast } from './ui.js';
import { h } from './util.js';

/** `chooseAgent(chatId)` asks for a chat's agent (the chat list's own dialog). */
export function initModelChip({ chooseAgent }) {
  $('model-chip').addEventListener('click', (ev) => {
    ev.stopPropagation();
    const lane = currentLane();
    const items = [['Choose a model…', () => askForModels(lane)]];
    if (app.agents.length > 1) items.push([`Agent: ${agentOf(lane)}…`, () => chooseAgent(lane.chat_id)]);
    popupMenu(ev.currentTarget, items);
    showUsage(lane, document.querySelector('.menu.popup'));
  });
}

/** Asks for the lane's usage and writes it at the top of the chip's menu, if still open. */
async function showUsage(lane, menu) {
  if (!menu) return;
  const note = h('p', { class: 'menu-note', id: 'chat-usage', role: 'status' }, 'Usage…');
  menu.prepend(note);
  const res = await request('usage', {}, lane, { quiet: true });
  if (!note.isConnected) return;
  note.textContent = res ? usageText(res.payload) : 'Usage not available';
}

/** "12 answers · 34,567 tokens · $0.0123", leaving out what no answer reported. */
export function usageText(u) {
  const parts = [`${u.answers} ${u.answers === 1 ? 'answer' : 'answers'}`];
  if (Number.isFinite(u.tokens)) parts.push(`${u.tokens.toLocaleString('en-US')} tokens`);
  if (Number.isFinite(u.cost)) parts.push(`$${u.cost < 0.01 ? u.cost.toFixed(4) : u.cost.toFixed(2)}`);
  return `This chat: ${parts.join(' · ')}`;
}

/** Notes a message's runtime in its lane: the one of the newest message (ids sort by time) wins. */
export function noteRuntime(lane, m) {
  if (!m.runtime || !m.message_id) return;
  if (lane.runtime && lane.runtime.id > m.message_id) return;
  lane.runtime = { id: m.message_id, model: m.runtime.model || null, agent: m.runtime.agent || null };
  if (app.current && lane === currentLane()) renderModelChip();
}

/** The chat's agent: its own, or the gateway's default (the first one listed). */
function agentOf(lane) {
  const chat = app.channels.get(lane.chat_id);
  return (chat && chat.agent) || app.agents[0] || 'agent';
}

export function renderModelChip() {
  if (!app.current) return;
  const lane = currentLane();
  const agent = agentOf(lane);
  const rt = lane.runtime;
  // A model noted under another agent is no longer the chat's (its agent was changed since).
  const model = rt && rt.model && (!rt.agent || rt.agent === agent) ? rt.model : '';
  const chip = $('model-chip');
  chip.querySelector('.chip-agent').textContent = agent;
  chip.querySelector('.chip-model').textContent = model;
  // The name begins with the words shown, as a spoken command would say them.
  chip.setAttribute('aria-label', model ? `${agent} ${model}: agent and model` : `${agent}: agent and model (model not known yet)`);
}

/** Sends `/model` in the lane: the gateway answers this device with the agent's model picker. */
async function askForModels(lane) {
  try {
    await trySend(keep(lane, { text: '/model', client_id: newClientId() }));
  } catch (e) {
    toast(`Not sent: ${e.message}`, 'error');
  }
}
