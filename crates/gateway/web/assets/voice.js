// Voice notes (docs/protocol.md §9 "Voice notes"): the microphone beside Send, shown when the
// gateway takes voice notes (`hello.ack.server_caps.voice`) and the browser can record. A tap
// starts a recording with a timer, a level meter, Cancel and Send (a second tap sends too);
// holding the button records while it is held and sends on release (sliding away from it
// cancels); Esc cancels. The note is
// uploaded as audio marked `voice` and sent as a message of that attachment only, through the
// same kept-until-echoed path as typed messages. One that cannot be sent stays in a bar with
// "Send again", never lost silently. In the transcript a voice note plays inline, with its
// transcript under it as the gateway makes it (`message.transcript`): "Transcribing…", the
// text, or why it failed with Retry.

import { icon } from './icons.js';
import { keep, newClientId, trySend } from './outbox.js';
import { $, app, currentLane, findMessage } from './state.js';
import { request, toast } from './ui.js';
import { h } from './util.js';

/** Whether this browser can record a voice note. */
export const canRecord = Boolean(navigator.mediaDevices && navigator.mediaDevices.getUserMedia && window.MediaRecorder);

/** A recording stops (and is sent) at this length. */
const LONGEST_MS = 10 * 60 * 1000;
/** A press held this long records while held and sends on release. */
const HOLD_MS = 350;
/** Sliding this far (px) from the held button cancels. */
const SLIDE_CANCEL_PX = 80;
/** Containers in order of preference: Opus in WebM (Chromium, Firefox), else MP4 (Safari). */
const TYPES = ['audio/webm;codecs=opus', 'audio/webm', 'audio/mp4'];

/** The recording under way: its lane, recorder, chunks, start, meter and press. */
let rec = null;
/** A press on the microphone: where and when it began, and whether it started the recording. */
let press = null;
/** The last voice note that could not be sent: `{ lane, file }`. */
let failed = null;
/** The click that follows a pointer's press is not a second press. */
let pointerClick = false;

export function initVoice() {
  const button = $('record');
  button.addEventListener('pointerdown', onPressStart);
  button.addEventListener('pointermove', onPressMove);
  button.addEventListener('pointerup', onPressEnd);
  button.addEventListener('pointercancel', () => { press = null; });
  // Keyboard (Enter, Space) and assistive technology click without a pointer press: the first
  // click records, the next sends. A pointer's click was handled by its press.
  button.addEventListener('click', () => {
    if (pointerClick) {
      pointerClick = false;
      return;
    }
    if (rec) finish(true);
    else start();
  });
  $('record-cancel').addEventListener('click', () => finish(false));
  $('record-send').addEventListener('click', () => finish(true));
  $('voice-retry').addEventListener('click', sendAgain);
  $('voice-discard').addEventListener('click', () => showFailed(null));
  document.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape' && rec && !document.querySelector('dialog[open]')) {
      ev.preventDefault();
      ev.stopImmediatePropagation();
      finish(false);
    }
  }, true);
  updateVoice();
}

/** Shows the microphone where the gateway takes voice notes and the browser records. */
export function updateVoice() {
  $('record').hidden = !(app.voice && canRecord);
}

function onPressStart(ev) {
  if (ev.button !== 0) return;
  pointerClick = true;
  press = { x: ev.clientX, at: performance.now(), started: !rec };
  ev.currentTarget.setPointerCapture(ev.pointerId);
  if (!rec) start();
}

function onPressMove(ev) {
  if (!press || !press.started || !rec) return;
  if (Math.abs(ev.clientX - press.x) > SLIDE_CANCEL_PX) {
    press = null;
    finish(false);
    toast('Voice note cancelled.');
  }
}

function onPressEnd() {
  const p = press;
  press = null;
  if (!p || !rec) return;
  // A press that started the recording and was held: release sends; a tap leaves it recording.
  // A tap while it records sends it.
  if (!p.started || performance.now() - p.at >= HOLD_MS) finish(true);
}

/** `m:ss` of a duration in ms. */
export function clock(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
}

async function start() {
  const now = { lane: currentLane(), chunks: [], started: performance.now(), recorder: null, stream: null };
  rec = now;
  $('recorder').hidden = false;
  $('record').setAttribute('aria-pressed', 'true');
  $('record-time').textContent = '0:00';
  let stream;
  try {
    stream = await navigator.mediaDevices.getUserMedia({ audio: { echoCancellation: true, noiseSuppression: true } });
  } catch (e) {
    if (rec === now) closeBar();
    const denied = e && (e.name === 'NotAllowedError' || e.name === 'SecurityError');
    toast(denied ? 'The browser may not use the microphone here: allow it in the site settings.' : `No microphone: ${e.message}`, 'error');
    return;
  }
  if (rec !== now) {
    // Cancelled while the browser asked for the microphone.
    stream.getTracks().forEach((t) => t.stop());
    return;
  }
  const type = TYPES.find((t) => MediaRecorder.isTypeSupported(t));
  const recorder = new MediaRecorder(stream, type ? { mimeType: type } : {});
  recorder.ondataavailable = (ev) => { if (ev.data.size) now.chunks.push(ev.data); };
  now.recorder = recorder;
  now.stream = stream;
  now.started = performance.now();
  recorder.start(1000);
  meter(now);
}

/** The timer and level meter of a recording, until it ends; it stops itself at the longest. */
function meter(now) {
  let analyser = null;
  try {
    now.audio = new AudioContext();
    analyser = now.audio.createAnalyser();
    analyser.fftSize = 512;
    now.audio.createMediaStreamSource(now.stream).connect(analyser);
  } catch {
    analyser = null;
  }
  const samples = new Float32Array(512);
  const tick = () => {
    if (rec !== now) return;
    const ms = performance.now() - now.started;
    $('record-time').textContent = clock(ms);
    if (analyser) {
      analyser.getFloatTimeDomainData(samples);
      const rms = Math.sqrt(samples.reduce((sum, v) => sum + v * v, 0) / samples.length);
      $('record-level').value = Math.min(1, rms * 4);
    }
    if (ms >= LONGEST_MS) return finish(true);
    now.timer = setTimeout(tick, 100);
  };
  tick();
}

/** Ends the recording: sends it, or throws it away. */
async function finish(send) {
  const now = rec;
  if (!now) return;
  rec = null;
  clearTimeout(now.timer);
  closeBar();
  const recorder = now.recorder;
  if (!recorder) return;
  if (recorder.state !== 'inactive') {
    const stopped = new Promise((resolve) => { recorder.onstop = resolve; });
    recorder.stop();
    await stopped;
  }
  now.stream.getTracks().forEach((t) => t.stop());
  if (now.audio) now.audio.close().catch(() => {});
  const ms = performance.now() - now.started;
  if (!send) return;
  if (!now.chunks.length || ms < 500) return toast('Too short: hold the microphone while you speak, or tap it to record.');
  const type = (recorder.mimeType || 'audio/webm').split(';')[0];
  const ext = type === 'audio/mp4' ? 'm4a' : 'webm';
  const file = new File(now.chunks, `Voice note ${clock(ms)}.${ext}`, { type });
  sendNote(now.lane, file);
}

function closeBar() {
  $('recorder').hidden = true;
  $('record').setAttribute('aria-pressed', 'false');
  $('record-level').value = 0;
}

/** Uploads a voice note and sends it as a message of the lane it was recorded in. */
async function sendNote(lane, file) {
  showFailed(null);
  const status = $('voice-status');
  status.hidden = false;
  status.textContent = `Sending ${file.name}…`;
  try {
    const ref = await app.media.upload(file, () => {}, { voice: true });
    const entry = keep(lane, { text: '', client_id: newClientId(), media_refs: [ref] });
    status.hidden = true;
    // Kept until its echo: a lost connection sends it again, as a typed message.
    await trySend(entry);
  } catch (e) {
    status.hidden = true;
    showFailed({ lane, file, reason: e.message });
  }
}

function sendAgain() {
  const again = failed;
  if (again) sendNote(again.lane, again.file);
}

/** The bar of a voice note that could not be sent (null: none). */
function showFailed(note) {
  failed = note;
  $('voice-failed').hidden = !note;
  if (note) $('voice-failed-text').textContent = `${note.file.name} was not sent: ${note.reason}`;
}

// ----- in the transcript ---------------------------------------------------------------------

/** A voice note in a message: Play, which pulls it once and plays it inline. */
export function voiceNote(m) {
  const play = h('button', { type: 'button', class: 'secondary voice-play', 'aria-label': `Play ${m.filename || 'the voice note'}` }, icon('mic'), 'Play');
  const fig = h('figure', { class: 'voice-note', dataset: { media: m.media_id } }, play);
  play.addEventListener('click', () => {
    play.disabled = true;
    app.media.url(m).then((url) => {
      // An <audio> element only decodes audio: the bytes the gateway recognised as audio cannot
      // run in this page, whatever the blob's type.
      const audio = h('audio', { controls: true, src: url, 'aria-label': m.filename || 'Voice note' });
      play.replaceWith(audio);
      audio.play().catch(() => {});
    }, (e) => {
      play.disabled = false;
      toast(`Voice note unavailable: ${e.message}`, 'error');
    });
  });
  return fig;
}

/** The transcript of a voice note's message, as it stands. */
export function transcriptEl(lane, messageId, t) {
  const box = h('div', { class: `voice-transcript state-${t.state}`, dataset: { state: t.state } });
  if (t.state === 'done') box.append(h('blockquote', { 'aria-label': 'Transcript' }, t.text || ''));
  else if (t.state === 'failed') {
    box.append(
      h('span', { class: 'error' }, `Not transcribed: ${t.error || 'the transcription failed'}`),
      h('button', { type: 'button', class: 'link', onclick: () => request('message.retry', { message_id: messageId }, lane) }, 'Retry'),
    );
  } else box.append(h('span', { class: 'pending' }, 'Transcribing…'));
  return box;
}

/** `message.transcript`: a voice note's transcript changed; its message shows it. */
export function onTranscript(frame, lane) {
  const p = frame.payload;
  const el = findMessage(p.message_id);
  if (!el) return;
  const t = { state: p.state, text: p.text, error: p.error };
  const old = el.querySelector(':scope > .voice-transcript');
  const now = transcriptEl(lane, p.message_id, t);
  if (old) old.replaceWith(now);
  else {
    const media = el.querySelector(':scope > .media');
    if (media) media.after(now);
  }
  if (t.state === 'done') el.dataset.transcript = t.text || '';
}
