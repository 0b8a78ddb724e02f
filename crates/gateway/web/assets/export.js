// Export of a chat as a Markdown file named after it: every page of its history, fetched with
// `history` requests back to the first message (not only the pages drawn), each message under a
// heading with its author and time, answers as their Markdown text, the turn's steps (commentary,
// plan, tool calls, questions) as short lines above the answer, the files its tools changed as
// fenced `diff` blocks, attachments by name; what a regenerate or an edit replaced is marked.
// The file is made harmless (harmless.js) before it is offered: raw HTML shows as text, script
// links keep their words only, remote images become links, so opening it runs and fetches nothing.

import { harmless } from './harmless.js';
import { laneTitle } from './state.js';
import { request, toast } from './ui.js';
import { h } from './util.js';

/** Messages per `history` request: the page size the transcript loads. */
const PAGE = 50;

/** How a turn that did not complete ended (complete answers carry no mark). */
const ENDINGS = { stopped: 'Stopped', cut_off: 'Cut off', agent_failed: 'Agent failed' };

const AUTHORS = { user: 'You', assistant: 'Agent', system: 'System', cron: 'Scheduled' };

/** Downloads the whole of a lane's history as `<chat name>.md`. */
export async function exportChat(lane) {
  const messages = [];
  let before = null;
  for (;;) {
    const payload = { limit: PAGE };
    if (before) payload.before_message_id = before;
    const res = await request('history', payload, lane);
    if (!res) return;
    const { messages: page, has_more: hasMore, oldest_message_id: oldest } = res.payload;
    messages.unshift(...page);
    if (!hasMore || !oldest || oldest === before) break;
    before = oldest;
  }
  const title = laneTitle(lane.chat_id, lane.thread_id);
  const blob = new Blob([chatMarkdown(title, messages)], { type: 'text/markdown;charset=utf-8' });
  const url = URL.createObjectURL(blob);
  const a = h('a', { href: url, download: fileName(title), hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
  toast(`Exported ${messages.length} messages`);
}

/** A file name from the chat's name: without the characters file systems refuse. */
export function fileName(title) {
  const base = title.replace(/[\\/:*?"<>|\u0000-\u001f]+/g, '-').replace(/^[\s.-]+|[\s.]+$/g, '');
  return `${base || 'chat'}.md`;
}

/** "2026-12-04 18:20 UTC": a time that reads the same wherever the file is opened. */
function when(ts) {
  return ts ? `${new Date(ts).toISOString().slice(0, 16).replace('T', ' ')} UTC` : '';
}

/** One line of a text: its first line, cut to `max` characters. */
function oneLine(text, max = 160) {
  const line = String(text || '').split('\n').find((l) => l.trim()) || '';
  return line.length > max ? `${line.slice(0, max - 1)}…` : line.trim();
}

/** A step of a turn as a short list item. */
function stepLine(s) {
  switch (s.kind) {
    case 'commentary':
      return `- ${oneLine(s.text)}`;
    case 'plan':
      return `- Plan: ${oneLine(s.text)}`;
    case 'tool': {
      const state = s.ok === undefined ? 'did not end' : s.ok ? 'ok' : 'failed';
      return `- Tool ${s.name}${s.preview ? `: \`${oneLine(s.preview, 120)}\`` : ''} (${state})`;
    }
    case 'picker':
      return `- ${s.picker === 'clarify' ? 'Question' : 'Approval'}: ${oneLine(s.title, 120)}${s.outcome ? ` (${s.label || s.value || s.outcome})` : ''}`;
    default:
      return null;
  }
}

/** A fence for `text`: longer than any run of backticks in it. */
function fence(text) {
  const longest = Math.max(0, ...(String(text).match(/`+/g) || []).map((r) => r.length));
  return '`'.repeat(Math.max(3, longest + 1));
}

/** The file changes of a turn's tool steps, each as its path, counts and a `diff` block. */
function changeLines(steps) {
  const out = [];
  for (const s of steps) {
    for (const c of (s.kind === 'tool' && Array.isArray(s.changes) ? s.changes : [])) {
      const counts = `+${Number(c.added) || 0} −${Number(c.removed) || 0}`;
      out.push(`Changed \`${c.path}\` (${c.new_file ? 'new file, ' : ''}${counts}${c.truncated ? ', diff cut short' : ''}):`, '');
      if (c.diff) {
        const f = fence(c.diff);
        out.push(`${f}diff`, String(c.diff).replace(/\n$/, ''), f, '');
      }
    }
  }
  return out;
}

/** The Markdown of a chat: a title, then each message under "## Author · time". */
export function chatMarkdown(title, messages) {
  const out = [`# ${title}`, '', `Exported from Iris on ${when(Date.now())}: ${messages.length} messages.`, ''];
  for (const m of messages) {
    out.push(`## ${AUTHORS[m.role] || m.role}${m.ts ? ` · ${when(m.ts)}` : ''}`, '');
    const steps = (m.steps || []).map(stepLine).filter(Boolean);
    if (steps.length) out.push(...steps, '');
    out.push(...changeLines(m.steps || []));
    if (m.text) out.push(m.text, '');
    for (const f of m.media || []) out.push(`${f.voice ? 'Voice note' : 'Attachment'}: ${f.filename || f.media_id}`, '');
    const t = m.transcript;
    if (t && t.state === 'done') out.push(...String(t.text || '').split('\n').map((l) => `> ${l}`), '');
    else if (t && t.state === 'failed') out.push(`*(Not transcribed: ${t.error || 'the transcription failed'})*`, '');
    if (ENDINGS[m.ended]) out.push(`*(${ENDINGS[m.ended]})*`, '');
    if (m.state === 'replaced') out.push('*(Replaced by a regenerate or an edit)*', '');
  }
  return harmless(out.join('\n'));
}
