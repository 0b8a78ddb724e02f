// Drag and drop upload: files dragged over the conversation (transcript or composer) show a drop
// zone; dropped, they take the attach button's path (the composer's file input), so they are
// hashed, uploaded and listed in the attachment tray the same way.

import { $, app } from './state.js';
import { h } from './util.js';

function hasFiles(ev) {
  return Boolean(ev.dataTransfer) && [...ev.dataTransfer.types].includes('Files');
}

/** Adds the drop zone to the conversation and listens for dragged files. */
export function initDropzone() {
  const main = $('main');
  const zone = h('div', { id: 'dropzone', class: 'dropzone', hidden: true },
    h('div', { class: 'dropzone-card' }, h('strong', {}, 'Drop files to attach them'), h('span', {}, 'They are sent with your next message.')));
  main.append(zone);
  let depth = 0;
  const hide = () => {
    depth = 0;
    zone.hidden = true;
  };
  main.addEventListener('dragenter', (ev) => {
    if (!hasFiles(ev) || !app.conn) return;
    ev.preventDefault();
    depth++;
    zone.hidden = false;
  });
  main.addEventListener('dragover', (ev) => {
    if (!hasFiles(ev) || !app.conn) return;
    ev.preventDefault();
    ev.dataTransfer.dropEffect = 'copy';
  });
  main.addEventListener('dragleave', (ev) => {
    if (!hasFiles(ev)) return;
    depth = Math.max(0, depth - 1);
    if (!depth) zone.hidden = true;
  });
  main.addEventListener('drop', (ev) => {
    if (!hasFiles(ev) || !app.conn) return;
    ev.preventDefault();
    hide();
    attach(ev.dataTransfer.files);
  });
  // A file dropped anywhere else is not opened by the browser in place of the page.
  for (const type of ['dragover', 'drop']) {
    window.addEventListener(type, (ev) => {
      if (hasFiles(ev) && !main.contains(ev.target)) ev.preventDefault();
    });
  }
  window.addEventListener('dragend', hide);
}

/** Hands files to the composer the way its attach button does. */
function attach(files) {
  if (!files || !files.length) return;
  const input = $('file-input');
  const list = new DataTransfer();
  for (const file of files) list.items.add(file);
  input.files = list.files;
  input.dispatchEvent(new Event('change', { bubbles: true }));
}
