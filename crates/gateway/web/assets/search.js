// Message search: the `#search` panel under the top bar, its query form and scope, the list of
// hits with their marked snippets, and jumping to a hit (opening its lane, loading older pages
// until the message is there, then scrolling to it and flashing it).

import { $, app, currentLane, laneTitle } from './state.js';
import { loadHistory, showLane } from './transcript.js';
import { toast } from './ui.js';
import { formatTime, h, snippetParts } from './util.js';

export function initSearch() {
  $('open-search').addEventListener('click', () => {
    const panel = $('search');
    panel.hidden = !panel.hidden;
    if (!panel.hidden) $('search-input').focus();
  });
  $('close-search').addEventListener('click', () => { $('search').hidden = true; });
  $('search-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    search();
  });
}

async function search() {
  const query = $('search-input').value.trim();
  if (!query) return;
  const scope = $('search-scope').value;
  const payload = { query, scope };
  const lane = currentLane();
  const ol = $('search-results');
  let res;
  try {
    res = await app.conn.request('search', payload, scope === 'chat' ? { chat_id: lane.chat_id, thread_id: lane.thread_id } : {});
  } catch (e) {
    // Refused or not sent: an earlier query's hits must not stand under this one.
    const why = e.code === 'disconnected' ? 'Not connected. Try again when the connection is back.' : e.message;
    ol.replaceChildren(h('li', { class: 'empty search-error', role: 'alert' }, `No search for “${query}”: ${why}`));
    return;
  }
  const hits = res.payload.hits || [];
  if (!hits.length) {
    ol.replaceChildren(h('li', { class: 'empty' }, `No messages match “${query}”.`));
    return;
  }
  ol.replaceChildren(...hits.map((hit) => h('li', {},
    h('button', { type: 'button', class: 'hit', dataset: { id: hit.message_id }, onclick: () => jumpTo(hit) },
      h('span', { class: 'hit-lane' }, laneTitle(hit.chat_id, hit.thread_id), ' · ', formatTime(hit.ts)),
      h('span', { class: 'hit-snippet' }, snippetParts(hit.snippet).map((part) => (part.mark ? h('mark', {}, part.text) : part.text)))))));
}

async function jumpTo(hit) {
  $('search').hidden = true;
  showLane(hit.chat_id, hit.thread_id || null);
  const lane = currentLane();
  if (!lane.historyLoaded) await loadHistory(lane);
  for (let page = 0; !lane.items.has(hit.message_id) && lane.hasMore && page < 40; page++) {
    if (!(await loadHistory(lane, true))) break;
  }
  const el = lane.items.get(hit.message_id);
  if (!el) {
    toast('That message is no longer there.', 'error');
    return;
  }
  el.scrollIntoView({ block: 'center' });
  el.classList.remove('flash');
  void el.offsetWidth;
  el.classList.add('flash');
  el.setAttribute('tabindex', '-1');
  el.focus({ preventScroll: true });
}
