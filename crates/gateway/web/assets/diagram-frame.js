// Runs in assets/diagram.html, the hidden frame in which Mermaid draws diagrams for diagram.js:
// Mermaid measures text in a live document and styles what it measures with inline styles, which
// the page's Content-Security-Policy refuses; this frame's policy allows those, and still no
// inline script. It answers each `{ id, source }` the page posts with
// `{ id, svg, label, width, height }` (the SVG sanitized by DOMPurify and made a standalone image
// document) or `{ id, error }`; the page shows the SVG as an image. `theme` (`default` or `dark`,
// as the page's theme) picks Mermaid's colours.

import DOMPurify from './vendor/dompurify/purify.es.mjs';
import mermaid from './vendor/mermaid/mermaid.esm.min.mjs';

const THEMES = new Set(['default', 'dark']);
let theme = null;

/** Mermaid set up for `wanted` (a theme of `THEMES`), when it is not already. */
function setTheme(wanted) {
  if (wanted === theme) return;
  theme = wanted;
  mermaid.initialize({
    startOnLoad: false,
    securityLevel: 'strict',
    // Labels as SVG text, never HTML in a foreignObject.
    htmlLabels: false,
    flowchart: { htmlLabels: false },
    theme,
    maxTextSize: 20000,
    maxEdges: 500,
  });
}

/** Mermaid's SVG, sanitized and made a standalone image document; null if nothing is left. */
function clean(svg) {
  const safe = DOMPurify.sanitize(svg, { USE_PROFILES: { svg: true, svgFilters: true }, ADD_TAGS: ['style'] });
  const root = new DOMParser().parseFromString(safe, 'text/html').querySelector('svg');
  if (!root) return null;
  const box = root.viewBox?.baseVal;
  const width = Math.ceil(box?.width || 0);
  const height = Math.ceil(box?.height || 0);
  if (!width || !height) return null;
  // An image needs its own size: Mermaid's is `width="100%"` with a `max-width` style.
  root.setAttribute('width', String(width));
  root.setAttribute('height', String(height));
  root.removeAttribute('style');
  const kind = (root.getAttribute('aria-roledescription') || '').replace(/-v\d+$/, '');
  return { svg: new XMLSerializer().serializeToString(root), label: kind ? `Diagram (${kind})` : 'Diagram', width, height };
}

let count = 0;
let queue = Promise.resolve();

async function draw(id, source, wanted) {
  count += 1;
  try {
    setTheme(wanted);
    const { svg } = await mermaid.render(`diagram-${count}`, source);
    const image = clean(svg);
    parent.postMessage(image ? { id, ...image } : { id, error: 'nothing to draw' }, location.origin);
  } catch (e) {
    parent.postMessage({ id, error: String(e?.message || e).slice(0, 500) }, location.origin);
  }
  // Whatever a failed render left behind.
  document.body.replaceChildren();
}

addEventListener('message', (ev) => {
  if (ev.origin !== location.origin || ev.source !== parent) return;
  const { id, source, theme: wanted } = ev.data || {};
  if (typeof id !== 'number' || typeof source !== 'string') return;
  // One at a time: Mermaid keeps the state of the diagram it draws.
  queue = queue.then(() => draw(id, source, THEMES.has(wanted) ? wanted : 'default'));
});

parent.postMessage({ ready: true }, location.origin);
