// Code blocks: syntax highlighting by highlight.js (core plus a curated set of common languages,
// see LANGUAGES in ../vendor.mjs), a language label and a copy button with "Copied" feedback.
//
// highlight.js is not part of the first paint: a block is shown escaped at once, and the core and
// its language are imported when the first block in that language appears (each module once),
// then the block is coloured in place.

import DOMPurify from './vendor/dompurify/purify.es.mjs';

/** The languages vendored under vendor/highlight/languages/ (as in ../vendor.mjs). */
export const LANGUAGES = ['bash', 'c', 'cpp', 'csharp', 'css', 'diff', 'dockerfile', 'go', 'ini', 'java', 'javascript', 'json',
  'kotlin', 'markdown', 'php', 'python', 'ruby', 'rust', 'shell', 'sql', 'swift', 'typescript', 'xml', 'yaml'];

/** Common other names of those languages (their highlight.js aliases) → the file to load. */
const ALIASES = {
  sh: 'bash', zsh: 'bash', h: 'c', cc: 'cpp', 'c++': 'cpp', hpp: 'cpp', cxx: 'cpp', hh: 'cpp', cs: 'csharp', 'c#': 'csharp',
  patch: 'diff', docker: 'dockerfile', golang: 'go', toml: 'ini', js: 'javascript', jsx: 'javascript', mjs: 'javascript',
  cjs: 'javascript', jsonc: 'json', kt: 'kotlin', kts: 'kotlin', md: 'markdown', py: 'python', gyp: 'python', rb: 'ruby',
  rs: 'rust', console: 'shell', shellsession: 'shell', ts: 'typescript', tsx: 'typescript', mts: 'typescript',
  html: 'xml', xhtml: 'xml', svg: 'xml', rss: 'xml', yml: 'yaml',
};

/** The language file for a fence's language name, or null if none is vendored. */
export function languageFile(lang) {
  const name = String(lang || '').toLowerCase();
  if (LANGUAGES.includes(name)) return name;
  return Object.hasOwn(ALIASES, name) ? ALIASES[name] : null;
}

/** Language file → promise of highlight.js with that language registered. */
const loading = new Map();
/** Language file → highlight.js, once registered (so later blocks colour synchronously). */
const ready = new Map();

function loadLanguage(file) {
  if (!loading.has(file)) {
    // A computed path, which a bundler leaves alone (web/bundle): the file is one of LANGUAGES.
    const language = `./vendor/highlight/languages/${file}.min.js`;
    loading.set(file, Promise.all([
      import('./vendor/highlight/core.min.js'),
      import(language),
    ]).then(([{ default: hljs }, { default: language }]) => {
      hljs.registerLanguage(file, language);
      ready.set(file, hljs);
      return hljs;
    }));
  }
  return loading.get(file);
}

/** Colours `code` (a `<code>` of escaped text) in language `file`. */
function paint(hljs, code, file) {
  const html = hljs.highlight(code.textContent, { language: file, ignoreIllegals: true }).value;
  // highlight.js escapes the text itself; only its spans are let through all the same.
  code.innerHTML = DOMPurify.sanitize(html, { ALLOWED_TAGS: ['span'], ALLOWED_ATTR: ['class'] });
}

/** Highlights `code` (a `<code>` of plain text) in `lang` now if that language is loaded, else once it is. */
export function highlightBlock(code, lang) {
  const file = languageFile(lang);
  if (!file) return;
  if (ready.has(file)) {
    paint(ready.get(file), code, file);
    return;
  }
  loadLanguage(file).then((hljs) => paint(hljs, code, file)).catch(() => {});
}

/** Puts every `pre > code` of `root` in a frame with its language label and a copy button. */
export function frameCodeBlocks(root) {
  for (const pre of root.querySelectorAll('pre')) {
    const code = pre.querySelector('code');
    if (!code) continue;
    const lang = /(?:^|\s)language-(\S+)/.exec(code.className)?.[1] || '';
    highlightBlock(code, lang);
    const label = document.createElement('span');
    label.className = 'code-lang';
    label.textContent = lang || 'text';
    const copy = document.createElement('button');
    copy.type = 'button';
    copy.className = 'code-copy';
    copy.textContent = 'Copy';
    copy.setAttribute('aria-label', lang ? `Copy ${lang} code` : 'Copy code');
    copy.addEventListener('click', () => copyText(code.textContent, copy));
    const head = document.createElement('div');
    head.className = 'code-head';
    head.append(label, copy);
    // A long line scrolls sideways: the block is reachable and scrollable by keyboard.
    pre.tabIndex = 0;
    pre.setAttribute('role', 'region');
    pre.setAttribute('aria-label', lang ? `Code, ${lang}` : 'Code');
    const frame = document.createElement('div');
    frame.className = 'code-block';
    pre.replaceWith(frame);
    frame.append(head, pre);
  }
}

async function copyText(text, button) {
  let ok = false;
  try {
    await navigator.clipboard.writeText(text);
    ok = true;
  } catch {
    ok = legacyCopy(text);
  }
  button.textContent = ok ? 'Copied' : 'Copy failed';
  clearTimeout(button.resetTimer);
  button.resetTimer = setTimeout(() => { button.textContent = 'Copy'; }, 2000);
}

/** The Clipboard API needs a secure context; plain http on a LAN address falls back to this. */
function legacyCopy(text) {
  const area = document.createElement('textarea');
  area.value = text;
  area.setAttribute('readonly', '');
  area.className = 'offscreen';
  document.body.append(area);
  area.select();
  let ok = false;
  try {
    ok = document.execCommand('copy');
  } catch {
    ok = false;
  }
  area.remove();
  return ok;
}
