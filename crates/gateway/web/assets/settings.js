// The Settings view (menu › Settings…), in the `#settings` dialog: the theme (System, Light or
// Dark, kept in this browser and applied by theme.js), notifications (the Notifications dialog,
// notifysettings.js), the paired devices (`devices.list`, with this device marked and Revoke on
// the devices it may revoke: itself and those paired through its codes, `device.revoke`), and
// pairing a new device (pairing.js). The Notifications, pairing and confirmation dialogs open
// above it in `#ask`; the device list is asked for again whenever the view opens and after a
// pairing dialog closes, so a device paired or revoked meanwhile shows.

import { icon } from './icons.js';
import { showNotificationSettings } from './notifysettings.js';
import { showPairDialog } from './pairing.js';
import { ago } from './pushstatus.js';
import { forgetDevice } from './session.js';
import { $, app, store } from './state.js';
import { confirmDialog } from './ui.js';
import { h } from './util.js';

const THEMES = [['system', 'System'], ['light', 'Light'], ['dark', 'Dark']];

/** The view's current showing; a late answer for an earlier one is dropped. */
let showing = null;

export function showSettings() {
  const dialog = $('settings');
  const view = {
    devices: h('ul', { class: 'settings-devices', 'aria-labelledby': 'settings-devices-title' }),
    note: h('p', { class: 'settings-note', role: 'status', 'aria-live': 'polite' }),
    heading: h('h3', { id: 'settings-devices-title', tabindex: '-1' }, 'Paired devices'),
  };
  showing = view;
  const pair = () => {
    showPairDialog();
    $('ask').addEventListener('close', () => refresh(view), { once: true });
  };
  dialog.replaceChildren(
    h('div', { class: 'settings-head' },
      h('h2', { id: 'settings-title' }, 'Settings'),
      h('button', { type: 'button', class: 'icon', 'aria-label': 'Close settings', onclick: () => dialog.close() }, icon('x'))),
    themeSection(),
    h('section', { class: 'settings-section', 'aria-labelledby': 'settings-notify-title' },
      h('h3', { id: 'settings-notify-title' }, 'Notifications'),
      h('p', { class: 'settings-hint' }, 'Whether this browser shows notifications, how the gateway reaches it, and a test.'),
      h('button', { type: 'button', class: 'secondary', 'aria-haspopup': 'dialog', onclick: () => showNotificationSettings() }, 'Notifications…')),
    h('section', { class: 'settings-section', 'aria-labelledby': 'settings-devices-title' },
      view.heading,
      h('p', { class: 'settings-hint' },
        'This browser can revoke itself and the devices paired with its codes. Others are revoked from the device that paired them, or on the gateway with iris-gateway devices revoke.'),
      view.devices,
      view.note),
    h('section', { class: 'settings-section', 'aria-labelledby': 'settings-pair-title' },
      h('h3', { id: 'settings-pair-title' }, 'Pair a new device'),
      h('p', { class: 'settings-hint' }, 'A one-time code and QR code for another phone or browser.'),
      h('button', { type: 'button', class: 'secondary', 'aria-haspopup': 'dialog', onclick: pair }, 'Pair a new device…')),
  );
  dialog.onclose = () => {
    if (showing === view) showing = null;
  };
  if (!dialog.open) dialog.showModal();
  // The first control, not the close button: the theme choice in force.
  const checked = dialog.querySelector('input[name=theme]:checked');
  if (checked) checked.focus();
  refresh(view);
}

/** Theme: three radio buttons; a choice is kept and applied at once. */
function themeSection() {
  const current = store.getItem('iris.theme') || 'system';
  const choose = (ev) => {
    const value = ev.target.value;
    if (value === 'system') store.removeItem('iris.theme');
    else store.setItem('iris.theme', value);
    document.dispatchEvent(new Event('iris-theme'));
  };
  return h('section', { class: 'settings-section' },
    h('fieldset', { class: 'settings-theme' },
      h('legend', {}, 'Theme'),
      THEMES.map(([value, label]) => h('label', { class: 'settings-choice' },
        h('input', { type: 'radio', name: 'theme', value, checked: value === current, onchange: choose }),
        h('span', {}, label)))));
}

function current(view) {
  return showing === view && $('settings').open;
}

/** Asks the gateway for the paired devices and shows them. */
async function refresh(view) {
  try {
    const res = await app.conn.request('devices.list', {});
    if (current(view)) showDevices(view, res.payload);
  } catch (e) {
    if (!current(view)) return;
    view.note.textContent = e.code === 'disconnected'
      ? 'Not connected: the devices show when the connection is back.'
      : `The gateway did not list the devices: ${e.message}`;
  }
}

function showDevices(view, list) {
  const now = Date.now();
  const devices = Array.isArray(list.devices) ? list.devices : [];
  view.devices.replaceChildren(...devices.map((d) => {
    const name = d.name || d.device_id;
    const facts = [
      d.online ? 'Online now' : `Last seen ${ago(Number(d.last_seen) || now, now)}`,
      d.paired_by ? `paired by ${nameOf(devices, d.paired_by)}` : null,
    ].filter(Boolean).join(' · ');
    return h('li', { class: `settings-device${d.this_device ? ' this-device' : ''}`, dataset: { deviceId: d.device_id } },
      h('div', { class: 'settings-device-text' },
        h('span', { class: 'settings-device-name' }, name),
        d.this_device ? h('span', { class: 'settings-badge' }, 'This device') : null,
        h('span', { class: 'settings-device-facts' }, facts)),
      d.may_revoke
        ? h('button', { type: 'button', class: 'secondary settings-revoke', 'aria-label': `Revoke ${name}`, onclick: () => revoke(view, d) }, 'Revoke')
        : null);
  }));
}

function nameOf(devices, id) {
  const d = devices.find((x) => x.device_id === id);
  return d ? d.name || d.device_id : id;
}

async function revoke(view, device) {
  const name = device.name || device.device_id;
  const ok = await confirmDialog(
    device.this_device ? 'Revoke this device?' : `Revoke ${name}?`,
    device.this_device
      ? 'This browser is signed out and its token stops working, and so are the devices paired with its codes. It needs a new pairing code to come back.'
      : `${name} is signed out at once and its token stops working, and so are the devices paired with its codes.`,
    'Revoke',
  );
  if (!ok || !current(view)) return;
  view.note.textContent = '';
  let res;
  try {
    res = await app.conn.request('device.revoke', { device_id: device.device_id });
  } catch (e) {
    if (!current(view)) return;
    view.note.textContent = e.code === 'auth'
      ? `Not revoked: ${e.message}.`
      : e.code === 'disconnected' ? 'Not connected. Try again when the connection is back.' : `Not revoked: ${e.message}`;
    return refresh(view);
  }
  const revoked = Array.isArray(res.payload.revoked) ? res.payload.revoked : [];
  if (device.this_device) {
    $('settings').close();
    forgetDevice('This browser was revoked. Pair it again with a new code to use it.');
    return;
  }
  if (!current(view)) return;
  showDevices(view, res.payload);
  const others = revoked.length - 1;
  view.note.textContent = `${name} was revoked${others > 0 ? `, with ${others} device${others === 1 ? '' : 's'} paired through its codes` : ''}.`;
  view.heading.focus();
}
