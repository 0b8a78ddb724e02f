// The Notifications dialog (menu › Notifications…), in the `#ask` dialog: whether this browser
// shows notifications, with the switch that turns them on or off (notify.js); which backend the
// gateway pushes this device through and how the last push through each one ended
// (`push.status`, docs/protocol.md §10, in words by pushstatus.js); and a test notification
// (`push.test`, at most one per device in 10 s), after which it shows the new status.

import { browserNotifications, toggleNotifications } from './notify.js';
import { backendName, outcomeText, routeText } from './pushstatus.js';
import { $, app } from './state.js';
import { h } from './util.js';

/** The dialog's current showing; a late answer for an earlier one is dropped. */
let showing = null;

export function showNotificationSettings() {
  const dialog = $('ask');
  const view = {
    browser: h('dd', { class: 'push-browser' }, 'Checking…'),
    route: h('dd', { class: 'push-route', id: 'push-route' }, 'Checking…'),
    last: h('div', { class: 'push-last' }),
    note: h('p', { class: 'push-note', role: 'status', 'aria-live': 'polite' }),
    toggle: h('button', { type: 'button', class: 'secondary push-toggle', disabled: true }, 'Turn on notifications'),
    test: h('button', { type: 'button', class: 'primary push-send-test', disabled: true, 'aria-describedby': 'push-route' }, 'Send a test notification'),
    status: null,
    busy: false,
  };
  showing = view;
  view.toggle.addEventListener('click', () => toggle(view));
  view.test.addEventListener('click', () => sendTest(view));
  dialog.replaceChildren(
    h('h2', { id: 'ask-title' }, 'Notifications'),
    h('dl', { class: 'push-facts' },
      h('div', {}, h('dt', {}, 'This browser'), view.browser, h('dd', {}, view.toggle)),
      h('div', {}, h('dt', {}, 'Pushes go through'), view.route)),
    h('h3', { class: 'push-last-title' }, 'Last notifications'),
    view.last,
    view.note,
    h('div', { class: 'dialog-actions push-actions' },
      view.test,
      h('button', { type: 'button', class: 'secondary', onclick: () => dialog.close('') }, 'Done')),
  );
  dialog.onclose = () => {
    if (showing === view) showing = null;
  };
  dialog.returnValue = '';
  dialog.showModal();
  refresh(view);
}

/** Whether `view` is still what the dialog shows. */
function current(view) {
  return showing === view && $('ask').open;
}

/** Shows this browser's state and asks the gateway for this device's push status. */
async function refresh(view) {
  await showBrowser(view);
  try {
    const res = await app.conn.request('push.status', {});
    if (current(view)) showStatus(view, res.payload);
  } catch (e) {
    if (!current(view)) return;
    view.route.textContent = 'Unknown';
    view.last.replaceChildren();
    view.note.textContent = e.code === 'disconnected'
      ? 'Not connected: what the gateway knows shows when the connection is back.'
      : `The gateway did not say: ${e.message}`;
    view.test.disabled = true;
  }
}

async function showBrowser(view) {
  const state = await browserNotifications();
  if (!current(view)) return;
  view.browser.textContent = state.text;
  view.toggle.textContent = state.on ? 'Turn off notifications' : 'Turn on notifications';
  view.toggle.disabled = !('Notification' in window) || Notification.permission === 'denied';
}

function showStatus(view, status) {
  view.status = status;
  const now = Date.now();
  view.route.textContent = routeText(status.route);
  view.route.classList.toggle('push-none', !status.route);
  const last = Array.isArray(status.last) ? status.last : [];
  view.last.replaceChildren(last.length
    ? h('ul', { class: 'push-outcomes', 'aria-label': 'Last notification through each service' }, last.map((o) => h('li', {
      class: `push-outcome push-${o.result}`,
    },
    h('span', { class: 'push-backend' }, backendName(o.backend)),
    h('span', { class: 'push-result' }, outcomeText(o, now)),
    o.test ? h('span', { class: 'push-test' }, 'Test') : null)))
    : h('p', { class: 'push-none-yet' }, 'No notifications sent to this device yet.'));
  view.test.disabled = view.busy || !status.route;
}

async function toggle(view) {
  view.toggle.disabled = true;
  const said = await toggleNotifications();
  if (!current(view)) return;
  view.note.textContent = said;
  await refresh(view);
}

async function sendTest(view) {
  if (view.busy) return;
  view.busy = true;
  view.test.disabled = true;
  view.test.textContent = 'Sending…';
  view.note.textContent = '';
  let said;
  try {
    const res = await app.conn.request('push.test', {});
    if (!current(view)) return;
    showStatus(view, res.payload);
    const outcome = (res.payload.last || [])[0];
    said = !res.payload.route
      ? 'Nothing was sent: no service can reach this device.'
      : outcome && outcome.test && outcome.result === 'delivered'
        ? 'Test notification sent. It shows on this device in a moment.'
        : 'The test notification did not go through: see below.';
  } catch (e) {
    if (!current(view)) return;
    said = e.code === 'rate_limited'
      ? 'Wait a few seconds before another test.'
      : e.code === 'disconnected' ? 'Not connected. Try again when the connection is back.' : e.message;
  } finally {
    view.busy = false;
    view.test.textContent = 'Send a test notification';
    view.test.disabled = !(view.status && view.status.route);
  }
  view.note.textContent = said;
}
