// Signing in and the state of the connection as the page shows it. It owns the token and the
// device identity kept in localStorage (including a token or a chat handed over in the address
// fragment by a pairing link or a notification), the sign-in form, signing out, and the banner
// and status label that follow the connection's state (`renderConnState`). Starting a session
// with a token is the entry module's job, passed in through `initSession`.

import { $, app, store } from './state.js';
import { defaultDeviceName, h, randomId } from './util.js';

let startSession = () => {};
let bannerTimer = null;

/** `start(token)` connects with a token the user typed in the sign-in form. */
export function initSession({ start }) {
  startSession = start;
  $('signin-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const token = $('signin-token').value.trim();
    if (!token) return;
    const name = $('signin-name').value.trim();
    if (name) store.setItem('iris.device_name', name);
    if (store.getItem('iris.token') !== token) store.removeItem('iris.cursor');
    store.setItem('iris.token', token);
    $('signin-token').value = '';
    startSession(token);
  });
  // Opening a pairing link in a tab that already runs the client signs in with its token.
  window.addEventListener('hashchange', () => {
    if (new URLSearchParams(location.hash.replace(/^#/, '')).has('token')) location.reload();
  });
}

export function deviceId() {
  let id = store.getItem('iris.device_id');
  if (!id) {
    id = randomId('web_');
    store.setItem('iris.device_id', id);
  }
  return id;
}

export function deviceName() {
  return store.getItem('iris.device_name') || defaultDeviceName();
}

function tokenFromFragment() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ''));
  const token = params.get('token');
  if (token !== null) {
    // The token must not linger in the address bar or the history.
    history.replaceState(null, '', location.pathname + location.search);
  }
  return token;
}

/** A notification click opens the client at `#chat_id=…&thread_id=…` (see sw.js). */
function laneFromFragment() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ''));
  const chatId = params.get('chat_id');
  if (!chatId) return;
  store.setItem('iris.lane', JSON.stringify({ chat_id: chatId, thread_id: params.get('thread_id') || null }));
  if (!params.has('token')) history.replaceState(null, '', location.pathname + location.search);
}

/** The token to start with, taking over one from the address fragment; null when there is none. */
export function tokenAtLoad() {
  laneFromFragment();
  const fromFragment = tokenFromFragment();
  const kept = store.getItem('iris.token');
  if (fromFragment && fromFragment !== kept) {
    // A link's token is only tried: any page can navigate this tab to `#token=…`, so what this
    // browser signs in with is set aside, and comes back if the gateway refuses the new one
    // (`restoreKept`). A pairing code makes a new device, under an id of its own.
    if (kept) {
      store.setItem('iris.kept', JSON.stringify({
        token: kept, cursor: store.getItem('iris.cursor'), deviceId: store.getItem('iris.device_id'),
      }));
      if (fromFragment.startsWith('ipc_')) store.setItem('iris.device_id', randomId('web_'));
    }
    store.removeItem('iris.cursor');
    store.setItem('iris.token', fromFragment);
  }
  return store.getItem('iris.token');
}

/** The new token was accepted: what was set aside for it is forgotten. */
export function forgetKept() {
  store.removeItem('iris.kept');
}

/** The token from a link was refused: signs in again with the one set aside; false when none was. */
function restoreKept() {
  const raw = store.getItem('iris.kept');
  if (!raw) return false;
  store.removeItem('iris.kept');
  let kept;
  try {
    kept = JSON.parse(raw);
  } catch {
    return false;
  }
  if (!kept || typeof kept.token !== 'string') return false;
  store.setItem('iris.token', kept.token);
  if (typeof kept.cursor === 'string') store.setItem('iris.cursor', kept.cursor);
  if (typeof kept.deviceId === 'string') store.setItem('iris.device_id', kept.deviceId);
  location.reload();
  return true;
}

export function showSignin(message) {
  $('boot').hidden = true;
  $('app').hidden = true;
  $('signin').hidden = false;
  const error = $('signin-error');
  error.replaceChildren(...(message ? [h('span', { class: 'error-icon', 'aria-hidden': 'true' }, '!'), h('span', {}, message)] : []));
  $('signin-name').value = deviceName();
  $('signin-token').focus();
}

export function showApp() {
  $('boot').hidden = true;
  $('signin').hidden = true;
  $('app').hidden = false;
}

export function signOut() {
  forgetToken();
  location.reload();
}

/** Stops the connection and forgets the token (signing out, or this device was revoked). */
export function forgetToken() {
  if (app.conn) app.conn.stop();
  store.removeItem('iris.token');
  store.removeItem('iris.cursor');
  store.removeItem('iris.kept');
}

/** What the sign-in form says after `forgetDevice` reloaded the page. */
const SIGNIN_NOTE = 'iris.signin_note';

/**
 * This browser was revoked: it forgets all it kept of the gateway (its token, its place in the
 * transcript, messages still waiting to be sent, the chat it showed), takes a new device id (the
 * gateway refuses the old one for good, so a new pairing needs another), and reloads, so that
 * nothing of the transcript stays in the page; the sign-in form then says `message`.
 */
export function forgetDevice(message) {
  forgetToken();
  for (const key of ['iris.outbox', 'iris.lane', 'iris.webpush']) store.removeItem(key);
  store.setItem('iris.device_id', randomId('web_'));
  sessionStorage.setItem(SIGNIN_NOTE, message);
  navigator.serviceWorker?.ready
    .then((reg) => reg.pushManager.getSubscription())
    .then((sub) => sub && sub.unsubscribe())
    .catch(() => {});
  location.reload();
}

/** The sign-in form's note left by `forgetDevice`, once. */
export function signinNote() {
  const note = sessionStorage.getItem(SIGNIN_NOTE) || '';
  sessionStorage.removeItem(SIGNIN_NOTE);
  return note;
}

/** Shows a connection state (see conn.js) in the banner and the status label. */
export function renderConnState(state) {
  const banner = $('banner');
  const label = $('conn-state');
  clearInterval(bannerTimer);
  banner.className = 'banner';
  banner.replaceChildren();
  document.body.dataset.conn = state.name;
  switch (state.name) {
    case 'online':
      banner.hidden = true;
      label.textContent = 'Connected';
      break;
    case 'connecting':
    case 'syncing':
      label.textContent = state.name === 'syncing' ? 'Syncing…' : 'Connecting…';
      banner.hidden = true;
      break;
    case 'restarting':
      banner.hidden = false;
      banner.classList.add('warn', 'restarting');
      banner.append(h('strong', {}, 'Gateway restarting'), ' — reconnecting when it is back…');
      label.textContent = 'Gateway restarting';
      break;
    case 'offline':
      showOffline(banner, state);
      label.textContent = 'Offline';
      break;
    case 'replaced':
      banner.hidden = false;
      banner.classList.add('warn');
      banner.append('Iris is open in another tab or window. ', h('button', { type: 'button', class: 'link', onclick: () => app.conn.connectNow() }, 'Use here'));
      label.textContent = 'Paused';
      break;
    case 'auth': {
      app.conn.stop();
      if (restoreKept()) break;
      // A device token the gateway no longer knows was revoked while this browser was away (or
      // the gateway's data was reset): like a revocation, it never works again.
      const deadDevice = state.message === 'invalid token' && (store.getItem('iris.token') || '').startsWith('idt_');
      if (state.message === 'this device was revoked' || deadDevice) {
        forgetDevice('This browser was removed from the gateway. Ask its owner to pair it again.');
        break;
      }
      showSignin(`The gateway refused the token (${state.message}).`);
      // A spent or expired pairing code will never work again.
      if (/^pairing code /.test(state.message || '')) store.removeItem('iris.token');
      break;
    }
    case 'unsupported':
      banner.hidden = false;
      banner.classList.add('error');
      banner.textContent = `This gateway cannot be used: ${state.message}`;
      break;
    default:
      break;
  }
}

/** The offline banner, counting down to the next attempt. */
function showOffline(banner, state) {
  banner.hidden = false;
  banner.classList.add('warn', 'offline');
  const text = h('span', {});
  const tick = () => {
    const s = Math.max(0, Math.ceil((state.retryAt - Date.now()) / 1000));
    text.textContent = s > 0 ? `Connection lost. Reconnecting in ${s} s…` : 'Connection lost. Reconnecting…';
  };
  tick();
  bannerTimer = setInterval(tick, 500);
  banner.append(text, h('button', { type: 'button', class: 'link', onclick: () => app.conn.connectNow() }, 'Retry now'));
}
