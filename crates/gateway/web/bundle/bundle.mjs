// Bundles the modules of Iris Web's first paint (everything `../assets/app.js` imports
// statically, the vendored libraries among them) into one minified module, `app.js` here, with
// esbuild (pinned in package-lock.json). On a phone's network a cold load then asks for one
// module instead of some sixty, six at a time behind a round trip each (BENCHMARKS.md, "Iris Web
// load"). What a module loads with `import()` (highlight.js, KaTeX) stays out of the bundle and
// is fetched as before, through the page's import map.
//
// The first line names the SHA-256 of the sources it was made from (every .js and .mjs file under
// ../assets, see `sourcesHash`): `build/web.rs` serves the bundle only while that matches, and
// the page's modules one by one otherwise (with a warning from `cargo build`), so a stale bundle
// is never served. `cargo test` fails on a stale one.
//
//   npm ci && node bundle.mjs          writes app.js
//   node bundle.mjs --check            exits 1 when app.js is not what the sources make

import { createHash } from 'node:crypto';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { build } from 'esbuild';

const here = path.dirname(fileURLToPath(import.meta.url));
const assets = path.join(here, '..', 'assets');
const output = path.join(here, 'app.js');

/** Every .js and .mjs file below `dir`, as paths relative to it with `/`, sorted bytewise. */
function scripts(dir, prefix = '') {
  const out = [];
  for (const entry of readdirSync(path.join(dir, prefix), { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) out.push(...scripts(dir, rel));
    else if (/\.m?js$/.test(entry.name)) out.push(rel);
  }
  return out.sort((a, b) => (Buffer.compare(Buffer.from(a), Buffer.from(b))));
}

/**
 * SHA-256 over each script under `assets` in order: its relative path, a NUL, its bytes, a NUL
 * (build/web.rs computes the same).
 */
export function sourcesHash(dir = assets) {
  const hash = createHash('sha256');
  for (const rel of scripts(dir)) {
    hash.update(rel);
    hash.update('\0');
    hash.update(readFileSync(path.join(dir, rel)));
    hash.update('\0');
  }
  return hash.digest('hex');
}

/** `import('…')` of a literal path stays an import of that path, resolved by the page. */
const dynamicImportsStay = {
  name: 'dynamic-imports-stay',
  setup(b) {
    b.onResolve({ filter: /.*/ }, (args) => (args.kind === 'dynamic-import' ? { path: args.path, external: true } : undefined));
  },
};

async function bundle() {
  const result = await build({
    entryPoints: [path.join(assets, 'app.js')],
    bundle: true,
    format: 'esm',
    target: 'esnext',
    minify: true,
    legalComments: 'eof',
    charset: 'utf8',
    write: false,
    outfile: output,
    logLevel: 'warning',
    banner: { js: `// Iris Web's first paint in one module, made by web/bundle/bundle.mjs (esbuild) from sources sha256 ${sourcesHash()}; do not edit.` },
    plugins: [dynamicImportsStay],
  });
  return result.outputFiles[0].contents;
}

const made = await bundle();
if (process.argv.includes('--check')) {
  let kept = null;
  try {
    kept = readFileSync(output);
  } catch {
    // Missing: stale.
  }
  if (!kept || !Buffer.from(made).equals(kept)) {
    console.error('web/bundle/app.js is not what the sources make: run `npm ci && node bundle.mjs` in crates/gateway/web/bundle');
    process.exit(1);
  }
  console.log('web/bundle/app.js is what the sources make');
} else {
  writeFileSync(output, made);
  console.log(`wrote ${path.relative(process.cwd(), output)} (${made.length} bytes)`);
}
