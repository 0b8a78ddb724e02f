// The top-bar menu (`#menu`): opening and closing it, its keyboard (arrows, Esc), and its
// actions (the command list, the chat's agent, exporting the chat, its agent's files (files.js), the runtime-footer and
// tool-details display settings with the body classes that apply them, reading the chat's answers aloud (speak.js), the Settings view
// (settings.js), the Notifications dialog, pairing another device, signing out). A click anywhere else closes it, and closes any popup menu too; Esc closes whatever menu
// or panel is open and gives the focus back to the button that opened it. A tap on an answer's
// runtime footer shows all of it (narrow screens show one line).

import { exportChat } from './export.js';
import { showFiles } from './files.js';
import { showNotificationSettings } from './notifysettings.js';
import { showPairDialog } from './pairing.js';
import { signOut } from './session.js';
import { showSettings } from './settings.js';
import { canRead, readsAloud, toggleReadsAloud } from './speak.js';
import { chooseAgent } from './sidebar.js';
import { $, app, currentLane, store } from './state.js';
import { closePopups, confirmDialog, menuKeys } from './ui.js';

export function initMenu() {
  document.addEventListener('click', (ev) => {
    if (!ev.target.closest('.popup')) closePopups();
    if (!ev.target.closest('#menu') && !ev.target.closest('#open-menu')) closeMainMenu();
    const runtime = ev.target.closest('.runtime');
    if (runtime) runtime.setAttribute('aria-expanded', String(runtime.getAttribute('aria-expanded') !== 'true'));
  });
  document.addEventListener('keydown', (ev) => {
    if (ev.key !== 'Escape' || ev.defaultPrevented || document.querySelector('dialog[open]')) return;
    if (!$('search').hidden && $('search').contains(document.activeElement)) {
      $('search').hidden = true;
      $('open-search').focus();
    }
  });
  $('open-menu').addEventListener('click', openMainMenu);
  menuKeys($('menu'), () => {
    closeMainMenu();
    $('open-menu').focus();
  });
  $('menu').addEventListener('click', (ev) => {
    const action = ev.target.closest('button') && ev.target.closest('button').dataset.action;
    closeMainMenu();
    $('open-menu').focus();
    runAction(action);
  });
  document.body.classList.toggle('no-footer', !app.settings.footer);
  document.body.classList.toggle('no-tools', !app.settings.tools);
}

function closeMainMenu() {
  $('menu').hidden = true;
  $('open-menu').setAttribute('aria-expanded', 'false');
}

/** Toggles the menu, with its checkboxes up to date. */
function openMainMenu() {
  const menu = $('menu');
  menu.hidden = !menu.hidden;
  $('open-menu').setAttribute('aria-expanded', String(!menu.hidden));
  menu.querySelector('[data-action=footer]').setAttribute('aria-checked', String(app.settings.footer));
  menu.querySelector('[data-action=tools]').setAttribute('aria-checked', String(app.settings.tools));
  const aloud = menu.querySelector('[data-action=aloud]');
  aloud.hidden = !canRead();
  aloud.setAttribute('aria-checked', String(readsAloud(currentLane())));
  const chat = app.channels.get(currentLane().chat_id);
  const agentItem = menu.querySelector('[data-action=agent]');
  agentItem.hidden = app.agents.length < 2 || !chat;
  if (chat) agentItem.textContent = `Agent: ${chat.agent || app.agents[0]}…`;
  if (!menu.hidden) menu.querySelector('button').focus();
}

function runAction(action) {
  switch (action) {
    case 'commands':
      $('commands').click();
      break;
    case 'agent':
      chooseAgent(currentLane().chat_id);
      break;
    case 'export':
      exportChat(currentLane());
      break;
    case 'files':
      showFiles();
      break;
    case 'footer':
      app.settings.footer = !app.settings.footer;
      store.setItem('iris.footer', app.settings.footer ? 'on' : 'off');
      document.body.classList.toggle('no-footer', !app.settings.footer);
      break;
    case 'tools':
      app.settings.tools = !app.settings.tools;
      store.setItem('iris.tools', app.settings.tools ? 'on' : 'off');
      document.body.classList.toggle('no-tools', !app.settings.tools);
      break;
    case 'aloud':
      toggleReadsAloud(currentLane());
      break;
    case 'settings':
      showSettings();
      break;
    case 'notify':
      showNotificationSettings();
      break;
    case 'pair':
      showPairDialog();
      break;
    case 'signout':
      confirmDialog('Sign out?', 'This browser forgets the token. Your chats stay on the gateway.', 'Sign out').then((ok) => ok && signOut());
      break;
    default:
      break;
  }
}
