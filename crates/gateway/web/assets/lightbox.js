// The image lightbox: an image in a message opens full size in a modal overlay; Esc, the close
// button or a click anywhere outside the picture closes it, and focus goes back to the image.

import { icon } from './icons.js';
import { h } from './util.js';

let dialog = null;
let opener = null;

/** Adds the (closed) lightbox dialog to the page. */
export function initLightbox() {
  const img = h('img', { class: 'lightbox-image', alt: '' });
  const caption = h('figcaption', { class: 'lightbox-caption' });
  const close = h('button', { type: 'button', class: 'icon lightbox-close', 'aria-label': 'Close image', onclick: () => dialog.close() }, icon('x'));
  dialog = h('dialog', { id: 'lightbox', class: 'lightbox', 'aria-label': 'Image' }, close, h('figure', {}, img, caption));
  // A click on the backdrop or around the picture closes; a click on the picture does not.
  dialog.addEventListener('click', (ev) => {
    if (ev.target !== img && !close.contains(ev.target)) dialog.close();
  });
  dialog.addEventListener('close', () => {
    img.removeAttribute('src');
    if (opener && opener.isConnected) opener.focus();
    opener = null;
  });
  document.body.append(dialog);
}

/** Shows `img` (a loaded image of a message) full size; `from` gets the focus back on close. */
export function openLightbox(img, from) {
  if (!dialog || !img.src) return;
  opener = from;
  const big = dialog.querySelector('.lightbox-image');
  big.src = img.src;
  big.alt = img.alt;
  dialog.querySelector('.lightbox-caption').textContent = img.alt;
  dialog.setAttribute('aria-label', img.alt || 'Image');
  dialog.showModal();
  dialog.querySelector('.lightbox-close').focus();
}
