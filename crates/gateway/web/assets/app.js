// Iris Web: the browser client. It speaks the Iris v1 protocol over /ws of the gateway that
// served it; everything it shows comes from frames (history pages, live and replayed events).
// Agent text is rendered with markdown.js: markdown-it without raw HTML, sanitized by DOMPurify.
//
// This is the entry module: it wires the views together (passing each the actions of the others
// it needs), starts a session with a token, and routes the connection's callbacks and every
// received frame to the view that owns it. The views are session.js (sign-in, connection
// banner), sidebar.js (chat list), transcript.js (messages, streaming, tool cards), composer.js
// (message box, slash commands, attachments), pickers.js and inbox.js (the agent's open questions,
// listed by hello.ack and replayed or live frames), voice.js (voice notes), speak.js (read aloud),
// search.js, menu.js and notify.js; the state
// they share is in state.js. activity.js says what the agent is doing (the busy bar) and
// keeps the read ticks.

import { trackTool, watchTicks } from './activity.js';
import { setFileOpener } from './changes.js';
import { initComposer, loadCatalog, updateComposer } from './composer.js';
import { Connection } from './conn.js';
import { showFiles } from './files.js';
import { Media } from './media.js';
import { onEcho, resendAll } from './outbox.js';
import { initMenu } from './menu.js';
import { initModelChip } from './modelchip.js';
import { onNotification, refreshWebPush, releaseHeldNotifications } from './notify.js';
import { initInbox } from './inbox.js';
import {
  closeStalePickers, initPickers, onOpenPickers, onPicker, settleGonePickers,
} from './pickers.js';
import { initRewind } from './rewind.js';
import { initSearch } from './search.js';
import {
  deviceId, deviceName, forgetKept, initSession, renderConnState, showApp, showSignin, signinNote, tokenAtLoad,
} from './session.js';
import {
  chooseAgent, initSidebar, noteMessage, onChannelFrame, previewsAfterDeletion, renderSidebar, setDirectory,
} from './sidebar.js';
import {
  $, app, currentLane, defaultChannel, laneOf, resetLane, shownLanes, store,
} from './state.js';
import {
  initTranscript, joinRunning, loadHistory, onBusy, onCommentary, onDeleted, onMessageState, onStatus, onStreamFrame, onTool,
  renderBusy, sendReceipt, sendReceipts, showLane, upsertMessage,
} from './transcript.js';
import { fillIcons } from './icons.js';
import { toast } from './ui.js';
import { initVoice, onTranscript, updateVoice } from './voice.js';

function start(token) {
  showApp();
  const saved = JSON.parse(store.getItem('iris.lane') || 'null');
  app.current = saved && saved.chat_id ? saved : { chat_id: 'default', thread_id: null };
  app.conn = new Connection({
    url: `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}${location.pathname.replace(/[^/]*$/, '')}ws`,
    token,
    deviceId: deviceId(),
    deviceName: deviceName(),
    storage: store,
    onFrame,
    onState,
    onHello,
    onSynced,
    focus: shownLanes,
  });
  app.media = new Media(app.conn);
  showLane(app.current.chat_id, app.current.thread_id);
  app.conn.start();
}

// ----- connection callbacks ----------------------------------------------------------------

function onHello(ack) {
  forgetKept();
  // A pairing code was spent for this browser: from now on it signs in with its own token. It is
  // kept in localStorage, which only pages of the gateway's own origin can read.
  if (ack.device_token) {
    app.conn.token = ack.device_token;
    store.setItem('iris.token', ack.device_token);
  }
  setDirectory(ack.channels || []);
  if (!app.channels.has(app.current.thread_id || app.current.chat_id)) {
    showLane(defaultChannel().chat_id, null);
  }
  app.toastBudget = 3;
  app.webpushKey = (ack.server_caps && ack.server_caps.webpush_key) || null;
  app.agents = (ack.server_caps && ack.server_caps.agents) || [];
  app.voice = Boolean(ack.server_caps && ack.server_caps.voice);
  app.speech = Boolean(ack.server_caps && ack.server_caps.speech);
  updateVoice();
  // Answers streaming now, whose start this page may never see (its cursor is past it).
  joinRunning(ack.running || []);
  // Pickers still open, which the replay may not bring (a reloaded page's cursor is past them).
  onOpenPickers(ack.open_pickers);
  renderSidebar();
  // The chat's history is asked for now, beside the replay, not after it: one round trip less
  // before a loading page shows its chat. Frames the replay brings are merged by message id.
  if (!currentLane().historyLoaded) loadHistory(currentLane());
}

function onSynced(done) {
  // The replay is over: what it did not settle is still open, and only those are announced.
  settleGonePickers();
  releaseHeldNotifications();
  // Messages kept while the connection was away go out now, each under its client_id.
  resendAll((e) => toast(`Not sent: ${e.message}`, 'error'));
  loadCatalog();
  refreshWebPush();
  const lane = currentLane();
  if (done.gap || !lane.historyLoaded) {
    if (done.gap) for (const l of app.lanes.values()) resetLane(l);
    loadHistory(currentLane());
  }
  sendReceipts(currentLane());
}

function onState(state) {
  renderConnState(state);
  updateComposer();
}

// ----- frames ------------------------------------------------------------------------------

function onMessage(frame) {
  const lane = laneOf(frame);
  noteMessage(lane.chat_id, lane.thread_id, frame.payload, frame.replayed);
  onEcho(frame.payload);
  upsertMessage(lane, frame.payload, frame);
  // Model and choice pickers are answered with a system message in their lane.
  if (frame.payload.role === 'system') closeStalePickers(lane, ['picker.model', 'picker.choice']);
  if (frame.payload.role !== 'user' && !document.hidden && lane === currentLane() && frame.payload.role === 'assistant') sendReceipt(lane, frame.payload.message_id);
}

const LANE_ACTIVITY = new Set(['message.start', 'message.update', 'message.stop', 'commentary', 'tool.start', 'tool.end', 'agent.busy', 'agent.idle']);

/**
 * After a frame of the lane shown: the busy bar's words, and the command list again when a turn
 * starts or ends (an agent announces its commands when its session starts) or the chat's agent
 * may have changed (`channel.list`).
 */
function afterFrame(frame) {
  if (!app.current) return;
  if (frame.type === 'channel.list') loadCatalog();
  if (!(LANE_ACTIVITY.has(frame.type) || frame.type.startsWith('picker.')) || laneOf(frame) !== currentLane()) return;
  const lane = currentLane();
  if (lane.busy) renderBusy();
  if (frame.type === 'agent.busy' && !lane.catalogTurn) {
    lane.catalogTurn = true;
    loadCatalog();
  } else if (frame.type === 'agent.idle') {
    lane.catalogTurn = false;
    loadCatalog();
  }
}

function onFrame(frame) {
  route(frame);
  afterFrame(frame);
}

function route(frame) {
  switch (frame.type) {
    case 'message':
      onMessage(frame);
      break;
    case 'message.start':
    case 'message.update':
    case 'message.stop':
      onStreamFrame(frame);
      if (frame.type === 'message.stop') {
        const lane = laneOf(frame);
        noteMessage(lane.chat_id, lane.thread_id, { role: 'assistant', text: frame.payload.final_text, message_id: frame.payload.message_id }, frame.replayed);
      }
      break;
    case 'message.deleted':
      onDeleted(frame);
      previewsAfterDeletion(frame.payload.message_ids || []);
      break;
    case 'message.state':
      onMessageState(frame);
      break;
    case 'message.transcript':
      onTranscript(frame, laneOf(frame));
      break;
    case 'commentary':
      onCommentary(frame);
      break;
    case 'tool.start':
    case 'tool.progress':
    case 'tool.end':
      trackTool(laneOf(frame), frame);
      onTool(frame);
      break;
    case 'agent.busy':
    case 'agent.idle':
      if (frame.type === 'agent.idle') trackTool(laneOf(frame), frame);
      onBusy(frame);
      break;
    case 'channel.list':
    case 'channel.created':
    case 'channel.renamed':
    case 'channel.deleted':
      onChannelFrame(frame);
      break;
    case 'notification':
      onNotification(frame);
      break;
    case 'read.receipt':
      // Ticks follow the transcript, the same on every device (activity.js).
      break;
    case 'status':
      onStatus(frame);
      break;
    case 'error':
      if (frame.id === undefined) toast(frame.payload.message, 'error');
      break;
    default:
      if (frame.type.startsWith('picker.')) onPicker(frame);
      break;
  }
}

// ----- wiring and start ----------------------------------------------------------------------

fillIcons();
watchTicks($('log'));
initSession({ start });
initTranscript({ renderSidebar, updateComposer, closeStalePickers });
initSidebar();
initPickers();
initInbox();
initComposer();
initVoice();
setFileOpener((path) => showFiles(path));
initRewind();
initSearch();
initMenu();
initModelChip({ chooseAgent });

// A click on a pushed notification while a tab is open shows its chat in that tab (see sw.js).
if ('serviceWorker' in navigator) {
  navigator.serviceWorker.addEventListener('message', (ev) => {
    const d = ev.data || {};
    if (d.type === 'iris.open' && d.chat_id && app.conn) showLane(d.chat_id, d.thread_id || null);
  });
}

// The service worker keeps the app shell, so that a reload without a network shows the client
// (offline) rather than the browser's error page.
if ('serviceWorker' in navigator) navigator.serviceWorker.register('sw.js').catch(() => {});

const token = tokenAtLoad();
if (!token) showSignin(signinNote());
else start(token);
