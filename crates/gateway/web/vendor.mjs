// Copies the browser builds of the pinned libraries (package.json, package-lock.json) and their
// licence files into assets/vendor/, and records each file's package, version and SHA-256 in
// assets/vendor/manifest.json. Run after `npm ci` here whenever a version changes:
//
//   cd crates/gateway/web && npm ci && node vendor.mjs
//
// The files are committed, so the gateway builds without a network; a test in
// crates/gateway/tests/web.rs fails when they no longer match the lockfile.

import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, 'assets', 'vendor');

/** Code-block languages offered by the highlighter. */
export const LANGUAGES = [
  'bash', 'c', 'cpp', 'csharp', 'css', 'diff', 'dockerfile', 'go', 'ini', 'java', 'javascript', 'json', 'kotlin',
  'markdown', 'php', 'python', 'ruby', 'rust', 'shell', 'sql', 'swift', 'typescript', 'xml', 'yaml',
];

/** Lucide icons the page uses (file names under lucide/dist/esm/icons/). */
export const ICONS = [
  'check', 'copy', 'ellipsis', 'file-text', 'hash', 'hourglass', 'menu', 'paperclip', 'mic', 'search', 'spool', 'volume-2', 'wrench',
  'x',
];

/**
 * Mermaid's ES module build: an entry module and the chunks it and its diagram types import,
 * each type's code only when a diagram of that type is drawn. Their relative imports need the
 * folder layout kept, and their names change with every release, so they are listed from the
 * package (source maps left out).
 */
const MERMAID_CHUNKS = 'dist/chunks/mermaid.esm.min';
const mermaidChunks = () => readdirSync(join(here, 'node_modules', 'mermaid', MERMAID_CHUNKS))
  .filter((f) => f.endsWith('.mjs'))
  .sort()
  .map((f) => [`${MERMAID_CHUNKS}/${f}`, `mermaid/chunks/mermaid.esm.min/${f}`]);

/** Package → [source path in the package, destination under vendor/]. */
const FILES = {
  'markdown-it': [
    ['dist/browser/markdown-it.esm.min.mjs', 'markdown-it/markdown-it.min.mjs'],
    ['LICENSE', 'markdown-it/LICENSE'],
  ],
  dompurify: [
    ['dist/purify.es.mjs', 'dompurify/purify.es.mjs'],
    ['LICENSE', 'dompurify/LICENSE'],
  ],
  '@highlightjs/cdn-assets': [
    ['es/core.min.js', 'highlight/core.min.js'],
    ...LANGUAGES.map((l) => [`es/languages/${l}.min.js`, `highlight/languages/${l}.min.js`]),
    ['LICENSE', 'highlight/LICENSE'],
  ],
  '@noble/hashes': [
    ...['sha2.js', '_md.js', '_u64.js', 'utils.js'].map((f) => [f, `noble-hashes/${f}`]),
    ['LICENSE', 'noble-hashes/LICENSE'],
  ],
  lucide: [
    ['dist/esm/createElement.mjs', 'lucide/createElement.mjs'],
    ['dist/esm/defaultAttributes.mjs', 'lucide/defaultAttributes.mjs'],
    ...ICONS.map((i) => [`dist/esm/icons/${i}.mjs`, `lucide/icons/${i}.mjs`]),
    ['LICENSE', 'lucide/LICENSE'],
  ],
  // The ES module build only: math is drawn as MathML (Chromium, Firefox and Safari render
  // MathML Core), so KaTeX's stylesheet and fonts are not needed.
  katex: [
    ['dist/katex.mjs', 'katex/katex.mjs'],
    ['LICENSE', 'katex/LICENSE'],
  ],
  mermaid: [
    ['dist/mermaid.esm.min.mjs', 'mermaid/mermaid.esm.min.mjs'],
    ...mermaidChunks(),
    ['LICENSE', 'mermaid/LICENSE'],
  ],
};

const lock = JSON.parse(readFileSync(join(here, 'package-lock.json'), 'utf8'));
rmSync(out, { recursive: true, force: true });
const files = [];
for (const [pkg, list] of Object.entries(FILES)) {
  const root = join(here, 'node_modules', pkg);
  const version = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version;
  const locked = lock.packages[`node_modules/${pkg}`]?.version;
  if (version !== locked) throw new Error(`${pkg}: node_modules has ${version}, the lockfile ${locked}; run npm ci`);
  for (const [src, dest] of list) {
    const to = join(out, dest);
    mkdirSync(dirname(to), { recursive: true });
    // Verbatim copies, so that each hash can be checked against the published package.
    const body = readFileSync(join(root, src));
    writeFileSync(to, body);
    files.push({ path: dest, package: pkg, version, sha256: createHash('sha256').update(body).digest('hex') });
  }
}
writeFileSync(join(out, 'manifest.json'), `${JSON.stringify({ files }, null, 2)}\n`);
console.log(`vendored ${files.length} files into ${out}`);
