// Code blocks: syntax highlighting by highlight.js (core plus a curated set of common languages,
// see LANGUAGES in ../vendor.mjs), a language label and a copy button with "Copied" feedback.

import hljs from './vendor/highlight/core.min.js';
import lang_bash from './vendor/highlight/languages/bash.min.js';
import lang_c from './vendor/highlight/languages/c.min.js';
import lang_cpp from './vendor/highlight/languages/cpp.min.js';
import lang_csharp from './vendor/highlight/languages/csharp.min.js';
import lang_css from './vendor/highlight/languages/css.min.js';
import lang_diff from './vendor/highlight/languages/diff.min.js';
import lang_dockerfile from './vendor/highlight/languages/dockerfile.min.js';
import lang_go from './vendor/highlight/languages/go.min.js';
import lang_ini from './vendor/highlight/languages/ini.min.js';
import lang_java from './vendor/highlight/languages/java.min.js';
import lang_javascript from './vendor/highlight/languages/javascript.min.js';
import lang_json from './vendor/highlight/languages/json.min.js';
import lang_kotlin from './vendor/highlight/languages/kotlin.min.js';
import lang_markdown from './vendor/highlight/languages/markdown.min.js';
import lang_php from './vendor/highlight/languages/php.min.js';
import lang_python from './vendor/highlight/languages/python.min.js';
import lang_ruby from './vendor/highlight/languages/ruby.min.js';
import lang_rust from './vendor/highlight/languages/rust.min.js';
import lang_shell from './vendor/highlight/languages/shell.min.js';
import lang_sql from './vendor/highlight/languages/sql.min.js';
import lang_swift from './vendor/highlight/languages/swift.min.js';
import lang_typescript from './vendor/highlight/languages/typescript.min.js';
import lang_xml from './vendor/highlight/languages/xml.min.js';
import lang_yaml from './vendor/highlight/languages/yaml.min.js';

for (const [name, lang] of Object.entries({ bash: lang_bash, c: lang_c, cpp: lang_cpp, csharp: lang_csharp, css: lang_css, diff: lang_diff, dockerfile: lang_dockerfile, go: lang_go, ini: lang_ini, java: lang_java, javascript: lang_javascript, json: lang_json, kotlin: lang_kotlin, markdown: lang_markdown, php: lang_php, python: lang_python, ruby: lang_ruby, rust: lang_rust, shell: lang_shell, sql: lang_sql, swift: lang_swift, typescript: lang_typescript, xml: lang_xml, yaml: lang_yaml })) hljs.registerLanguage(name, lang);

/** Highlighted HTML for `code` (escaped by highlight.js), or null for an unknown language. */
export function highlight(code, lang) {
  if (!lang || !hljs.getLanguage(lang)) return null;
  return hljs.highlight(code, { language: lang, ignoreIllegals: true }).value;
}

/** Puts every `pre > code` of `root` in a frame with its language label and a copy button. */
export function frameCodeBlocks(root) {
  for (const pre of root.querySelectorAll('pre')) {
    const code = pre.querySelector('code');
    if (!code) continue;
    const lang = /(?:^|\s)language-(\S+)/.exec(code.className)?.[1] || '';
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
