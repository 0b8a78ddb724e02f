// Mermaid diagrams: a ```mermaid code block (once its closing fence has arrived) is drawn as an
// image, with its source one click away ("Show source", with Copy like any code block).
//
// Agent text is hostile, so the diagram never becomes live markup in the page. Mermaid
// (`securityLevel: 'strict'`) runs in a hidden frame, assets/diagram.html with
// diagram-frame.js, loaded the first time a message has a diagram; the SVG it returns, sanitized
// there by DOMPurify, is shown as an <img> of a `blob:` URL, and an image never runs script,
// follows a link or loads anything. The page never parses it: parsing its inline styles here
// would break the page's Content-Security-Policy. A diagram Mermaid cannot read stays a code
// block. Diagrams take the page's theme (Mermaid's `dark` on a dark page), and are drawn again
// when it changes.

/** Diagrams kept drawn (by theme and source), so a streaming answer's redraws do not draw them again. */
const KEEP = 50;
/** Theme and source → promise of { svg, label, width, height } or null. */
const drawing = new Map();
/** Theme and source → the same, once settled: drawn again at once. */
const drawn = new Map();

/** Mermaid's theme for the page's. */
const theme = () => (document.documentElement.dataset.theme === 'dark' ? 'dark' : 'default');
const keyOf = (source) => `${theme()}\n${source}`;

let frame = null;
let ready = null;
let nextId = 0;
const waiting = new Map();

/** The hidden frame Mermaid draws in, made (and Mermaid loaded) the first time it is needed. */
function openFrame() {
  ready ??= new Promise((resolve) => {
    frame = document.createElement('iframe');
    frame.className = 'diagram-frame';
    frame.title = 'Diagram drawing';
    frame.tabIndex = -1;
    frame.setAttribute('aria-hidden', 'true');
    addEventListener('message', (ev) => {
      if (ev.source !== frame.contentWindow || ev.origin !== location.origin) return;
      const data = ev.data || {};
      if (data.ready) {
        resolve();
        return;
      }
      const done = waiting.get(data.id);
      waiting.delete(data.id);
      done?.(data);
    });
    frame.src = new URL('./diagram.html', import.meta.url).href;
    document.body.append(frame);
  });
  return ready;
}

function render(source) {
  const key = keyOf(source);
  const wanted = theme();
  if (!drawing.has(key)) {
    if (drawing.size >= KEEP) {
      const oldest = drawing.keys().next().value;
      drawing.delete(oldest);
      drawn.delete(oldest);
    }
    const promise = openFrame()
      .then(() => new Promise((resolve) => {
        nextId += 1;
        waiting.set(nextId, resolve);
        frame.contentWindow.postMessage({ id: nextId, source, theme: wanted }, location.origin);
      }))
      .then((data) => (typeof data.svg === 'string' && data.width > 0 && data.height > 0
        ? { svg: data.svg, label: String(data.label || 'Diagram'), width: data.width, height: data.height, theme: wanted } : null))
      .catch(() => null)
      .then((result) => {
        if (drawing.get(key) === promise) drawn.set(key, result);
        return result;
      });
    drawing.set(key, promise);
  }
  return drawing.get(key);
}

/** The image of a drawn diagram, as a `blob:` URL freed once it is shown. */
function setImage(img, result) {
  const url = URL.createObjectURL(new Blob([result.svg], { type: 'image/svg+xml' }));
  const free = () => URL.revokeObjectURL(url);
  img.addEventListener('load', free, { once: true });
  img.addEventListener('error', free, { once: true });
  img.width = result.width;
  img.height = result.height;
  img.dataset.theme = result.theme;
  img.src = url;
}

/** Replaces a framed code block by the diagram, its source behind "Show source". */
function show(block, result) {
  if (!result || !block.parentNode) return;
  const img = document.createElement('img');
  img.className = 'diagram-image';
  img.alt = result.label;
  img.decoding = 'async';
  setImage(img, result);
  const summary = document.createElement('summary');
  summary.textContent = 'Show source';
  const source = document.createElement('details');
  source.className = 'diagram-source';
  const figure = document.createElement('figure');
  figure.className = 'diagram';
  block.replaceWith(figure);
  source.append(summary, block);
  figure.append(img, source);
}

/** Draws every closed ```mermaid block under `root` (framed by code.js): now if drawn before. */
export function drawDiagrams(root) {
  for (const code of root.querySelectorAll('code[data-diagram]')) {
    const block = code.closest('.code-block');
    if (!block) continue;
    const source = code.textContent;
    if (drawn.has(keyOf(source))) {
      show(block, drawn.get(keyOf(source)));
      continue;
    }
    render(source).then((result) => show(block, result));
  }
}

/** Draws the diagrams shown again in the page's new theme. */
function redraw() {
  for (const img of document.querySelectorAll('figure.diagram > img.diagram-image')) {
    const code = img.parentNode.querySelector('code[data-diagram]');
    if (!code || img.dataset.theme === theme()) continue;
    render(code.textContent).then((result) => {
      if (result && img.isConnected) setImage(img, result);
    });
  }
}

new MutationObserver(redraw).observe(document.documentElement, { attributes: true, attributeFilter: ['data-theme'] });
