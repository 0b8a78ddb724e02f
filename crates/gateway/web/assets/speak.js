// Read aloud: an answer spoken by the browser's own speech synthesis (the system's voices, offline
// on phones: nothing leaves the device). Each answer offers "Read aloud" (its quick actions and its
// menu), "Stop reading" while it speaks; the top-bar menu's "Read answers aloud" speaks every
// answer that completes live in the chat while that chat is open and the page is shown (kept per
// chat on this device). What is read is the answer's prose as it is drawn: code blocks, formulas,
// diagrams and images are skipped, and tool cards and reasoning are not part of an answer's text.
// A browser without speech synthesis offers none of this, unless the gateway has a voice.
//
// When the gateway has a voice of its own (`server_caps.speech`, `[voice] speech_url`), the answer
// is read in that voice instead: its prose in pieces of at most 600 characters cut at sentence
// ends, each a `speech.create` whose recording is pulled (media.js) and played in an Audio
// element, the next piece asked for while one plays. If the server voice fails, the rest of that
// answer is read by the browser's synthesis (said once in a toast).

import { app, currentLane, store } from './state.js';
import { toast } from './ui.js';

const synth = window.speechSynthesis;

/** Whether this browser can speak. */
export const canSpeak = Boolean(synth && window.SpeechSynthesisUtterance);

/** Whether answers can be read aloud: by this browser, or in the gateway's voice. */
export function canRead() {
  return canSpeak || app.speech;
}

/** Chrome stops long utterances after about 15 s: the text goes in pieces of at most this. */
const PIECE = 200;

/** The server voice takes longer pieces: fewer requests, and no 15 s limit. */
const SERVER_PIECE = 600;

/** What the answer being read is, and how far its pieces have come. */
let reading = null;

/** The words of an answer's drawn body: its prose without code, formulas, diagrams or images. */
export function speakableText(body) {
  const copy = body.cloneNode(true);
  copy.querySelectorAll('pre, .code-block, .diagram, .math-inline, .math-display, math, img, svg, button, figure').forEach((n) => n.remove());
  // Blocks end a sentence, so that a heading and the paragraph below are not read as one.
  copy.querySelectorAll('p, li, h1, h2, h3, h4, h5, h6, tr, blockquote, div').forEach((n) => n.append('\n'));
  return copy.textContent.replace(/[ \t\u00a0]+/g, ' ').replace(/\s*\n\s*/g, '\n').trim();
}

/** `text` cut into pieces of at most `max` characters, at sentence ends where there are some. */
export function pieces(text, max = PIECE) {
  const out = [];
  for (const line of text.split('\n')) {
    let rest = line.trim();
    while (rest.length > max) {
      const head = rest.slice(0, max);
      const cut = Math.max(head.lastIndexOf('. '), head.lastIndexOf('! '), head.lastIndexOf('? '), head.lastIndexOf('; '));
      const at = cut > max / 3 ? cut + 1 : (head.lastIndexOf(' ') > 0 ? head.lastIndexOf(' ') : max);
      out.push(rest.slice(0, at).trim());
      rest = rest.slice(at).trim();
    }
    if (rest) out.push(rest);
  }
  return out;
}

/** Consecutive pieces joined by line breaks into as few as fit in `max` characters each. */
export function packed(parts, max) {
  const out = [];
  for (const part of parts) {
    const last = out.length - 1;
    if (last >= 0 && out[last].length + 1 + part.length <= max) out[last] += `\n${part}`;
    else out.push(part);
  }
  return out;
}

/** Whether `el` (a message) is being read now. */
export function isReading(el) {
  return reading !== null && reading.el === el;
}

/** Reads an answer aloud, or stops it when it is the one being read. */
export function toggleReading(el) {
  if (isReading(el)) return stopReading();
  return read(el);
}

/** Stops whatever is being read. */
export function stopReading() {
  const was = reading;
  reading = null;
  if (canSpeak) synth.cancel();
  if (was && was.audio) was.audio();
  if (was) mark(was.el, false);
}

function read(el) {
  if (!canRead()) return;
  const body = el.querySelector(':scope > .body');
  const text = body ? speakableText(body) : '';
  stopReading();
  if (!text) return toast('Nothing to read in this answer.');
  const now = { el };
  reading = now;
  mark(el, true);
  if (app.speech) readWithServer(now, text);
  else readWithBrowser(now, text);
}

/** Speaks `text` for the reading `now` with the browser's synthesis. */
function readWithBrowser(now, text) {
  const parts = pieces(text);
  if (!parts.length) return finished(now);
  parts.forEach((part, i) => {
    const u = new SpeechSynthesisUtterance(part);
    u.lang = document.documentElement.lang || navigator.language || 'en';
    if (i === parts.length - 1) u.onend = () => finished(now);
    u.onerror = (ev) => {
      if (ev.error === 'interrupted' || ev.error === 'canceled') return;
      finished(now);
      toast(`The browser could not read the answer aloud (${ev.error || 'speech failed'}).`, 'error');
    };
    synth.speak(u);
  });
}

/** Reads `text` for the reading `now` in the gateway's voice, piece after piece. */
async function readWithServer(now, text) {
  const parts = packed(pieces(text, SERVER_PIECE), SERVER_PIECE);
  const recording = (part) => {
    const p = app.conn.request('speech.create', { text: part }).then((f) => app.media.url(f.payload));
    p.catch(() => {});
    return p;
  };
  let next = recording(parts[0]);
  for (let i = 0; i < parts.length; i += 1) {
    try {
      const url = await next;
      if (reading !== now) return;
      // The next piece is made while this one plays.
      next = i + 1 < parts.length ? recording(parts[i + 1]) : null;
      await play(now, url);
    } catch (e) {
      if (reading !== now) return;
      return fallBack(now, parts.slice(i).join('\n'), e);
    }
    if (reading !== now) return;
  }
  finished(now);
}

/** Plays a recording for the reading `now`; resolves when it ends or is stopped. */
function play(now, url) {
  return new Promise((resolve, reject) => {
    const audio = new Audio(url);
    now.audio = () => {
      audio.pause();
      resolve();
    };
    audio.onended = () => resolve();
    audio.onerror = () => reject(new Error('the recording could not be played'));
    audio.play().catch(reject);
  });
}

/** The server voice failed: the rest of the answer is read by the browser, and that is said. */
function fallBack(now, rest, e) {
  now.audio = null;
  const why = (e && e.message) || 'it failed';
  if (!canSpeak) {
    finished(now);
    return toast(`The server voice could not read the answer aloud (${why}).`, 'error');
  }
  toast(`The server voice could not read the answer aloud (${why}); this browser reads it instead.`);
  readWithBrowser(now, rest);
}

function finished(which) {
  if (reading !== which) return;
  reading = null;
  mark(which.el, false);
}

/** The answer's Read aloud button says what a press does now. */
function mark(el, on) {
  el.classList.toggle('reading', on);
  const button = el.querySelector(':scope > .msg-actions > .speak');
  if (!button) return;
  button.setAttribute('aria-pressed', String(on));
  button.lastChild.textContent = on ? 'Stop reading' : 'Read aloud';
}

// ----- reading answers as they come, per chat ----------------------------------------------

const key = (lane) => `iris.readaloud.${lane.key}`;

/** Whether answers of `lane` are read as they complete. */
export function readsAloud(lane) {
  return canRead() && store.getItem(key(lane)) === 'on';
}

/** Switches reading answers aloud for `lane` (the chat shown), and says so. */
export function toggleReadsAloud(lane) {
  const on = !readsAloud(lane);
  if (on) store.setItem(key(lane), 'on');
  else {
    store.removeItem(key(lane));
    stopReading();
  }
  toast(on ? 'New answers in this chat are read aloud while it is open.' : 'Answers are no longer read aloud.');
}

/**
 * An answer of `lane` completed live (`el`, drawn): read when the chat asks for it, is the one
 * shown and the page is visible. Answers that arrive by sync or history are never read.
 */
export function answerCompleted(lane, el, ended) {
  if (!readsAloud(lane) || lane !== currentLane() || document.hidden) return;
  if (ended && ended !== 'completed') return;
  read(el);
}
