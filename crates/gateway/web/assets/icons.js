// Icons: Lucide's SVG icons (vendored, see ICONS in ../vendor.mjs), drawn with currentColor so
// that they follow the text colour, instead of emoji that need an emoji font.

import createElement from './vendor/lucide/createElement.mjs';
import Check from './vendor/lucide/icons/check.mjs';
import Copy from './vendor/lucide/icons/copy.mjs';
import Ellipsis from './vendor/lucide/icons/ellipsis.mjs';
import FileText from './vendor/lucide/icons/file-text.mjs';
import Hash from './vendor/lucide/icons/hash.mjs';
import Hourglass from './vendor/lucide/icons/hourglass.mjs';
import Menu from './vendor/lucide/icons/menu.mjs';
import Mic from './vendor/lucide/icons/mic.mjs';
import Paperclip from './vendor/lucide/icons/paperclip.mjs';
import Search from './vendor/lucide/icons/search.mjs';
import Spool from './vendor/lucide/icons/spool.mjs';
import Volume2 from './vendor/lucide/icons/volume-2.mjs';
import Wrench from './vendor/lucide/icons/wrench.mjs';
import X from './vendor/lucide/icons/x.mjs';

const ICONS = {
  check: Check, copy: Copy, ellipsis: Ellipsis, file: FileText, hash: Hash, hourglass: Hourglass, menu: Menu, mic: Mic,
  paperclip: Paperclip, search: Search, speaker: Volume2, thread: Spool, wrench: Wrench, x: X,
};

/** A decorative SVG icon (the control around it carries the accessible name). */
export function icon(name) {
  const svg = createElement(ICONS[name], { width: '1em', height: '1em', class: `lucide icon-${name}`, 'aria-hidden': 'true', focusable: 'false' });
  return svg;
}

/** Fills every `[data-icon]` element under `root` with its icon (the page's static buttons). */
export function fillIcons(root = document) {
  for (const el of root.querySelectorAll('[data-icon]')) el.replaceChildren(icon(el.dataset.icon));
}
